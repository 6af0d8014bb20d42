package observe

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/meshbus/mesh/mesh/wire"
)

// get asks the in-process server's monitoring endpoint, as a probe would.
func get(t *testing.T, u string) []byte {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", u, res.StatusCode, err)
	}
	return b
}

// TestTheMonitoringEndpointReadsAsTheServerAnswers: the readings of /varz,
// /connz and /subsz against the real server, with what a bed compares.
func TestTheMonitoringEndpointReadsAsTheServerAnswers(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	mon := s.MonitorAddr()
	host, port := mon.IP.String(), mon.Port

	v, err := ParseVarz(get(t, VarzURL(host, port)))
	if err != nil || v.ConfigLoadTime.IsZero() || v.ConfigDigest == "" {
		t.Fatalf("varz: %+v, %v", v, err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	after, err := ParseVarz(get(t, VarzURL(host, port)))
	if err != nil || after.Since(v) != (Change{Reloaded: true}) {
		t.Fatalf("a reload of the same file: expected a later load time, the same start and digest, got %+v then %+v (%v)", v, after, err)
	}
	if again := after.Since(after); again != (Change{}) {
		t.Fatalf("a reading against itself: %+v", again)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Creds[wire.PersonUser("alice")], "")
	if err != nil {
		t.Fatal(err)
	}
	open, err := ConnectionReasons(get(t, ConnzURL(host, port, "open")), wire.PersonUser("alice"))
	if err != nil || len(open) != 1 || open[0] != "" {
		t.Fatalf("alice's open connection: %q, %v", open, err)
	}
	if _, err := c.SubscribeSync(wire.Under(wire.PersonInbox("alice"))); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	n, err := Subscribers(get(t, SubszURL(host, port, wire.PersonInbox("alice")+".x")))
	if err != nil || n != 1 {
		t.Fatalf("subscriptions reached: %d, %v", n, err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		closed, err := ConnectionReasons(get(t, ConnzURL(host, port, "closed")), wire.PersonUser("alice"))
		if err == nil && len(closed) == 1 && closed[0] == server.ClientClosed.String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's closed connection: %q, %v", closed, err)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
}

func TestReadingsRefuseWhatIsNotAnAnswer(t *testing.T) {
	if _, err := ParseVarz([]byte(`{}`)); err == nil {
		t.Error("an empty varz was read")
	}
	if _, err := Subscribers([]byte(`{"num_subscriptions":3}`)); err == nil {
		t.Error("a subsz without a total was read")
	}
	if _, err := ConnectionReasons([]byte(`<html>`), "u"); err == nil {
		t.Error("an html page was read as connz")
	}
	if got := ConnzURL("::1", 8222, "closed"); !strings.HasPrefix(got, "http://[::1]:8222/connz?") {
		t.Errorf("an IPv6 host: %s", got)
	}
	pid, ok := ServerPID(map[int]string{1: "/mesh-nats --server=/nats-server", 7: "/nats-server -c /run/mesh-nats/nats.conf", 9: "/nats-server -c x -t"})
	if !ok || pid != 7 {
		t.Errorf("server pid: %d %v", pid, ok)
	}
	if _, ok := ServerPID(map[int]string{1: "/mesh-nats"}); ok {
		t.Error("a server pid found where there is none")
	}
}

func TestChangeSinceAnEarlierReading(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	before := Varz{Start: t0, ConfigLoadTime: t0, ConfigDigest: "a"}
	for _, c := range []struct {
		name string
		now  Varz
		want Change
	}{
		{"nothing", before, Change{}},
		{"a reload of the same file", Varz{Start: t0, ConfigLoadTime: t0.Add(time.Second), ConfigDigest: "a"}, Change{Reloaded: true}},
		{"a new configuration", Varz{Start: t0, ConfigLoadTime: t0.Add(time.Second), ConfigDigest: "b"}, Change{Reloaded: true, NewConfiguration: true}},
		{"a restart", Varz{Start: t0.Add(time.Minute), ConfigLoadTime: t0.Add(time.Minute), ConfigDigest: "a"}, Change{Restarted: true, Reloaded: true}},
	} {
		if got := c.now.Since(before); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestConnectedUsersAreEachUserOnce(t *testing.T) {
	body := []byte(`{"connections":[{"authorized_user":"ops","reason":"Client Closed"},{"authorized_user":"controller"},{"authorized_user":"ops"}]}`)
	got, err := ConnectedUsers(body)
	if err != nil || !slices.Equal(got, []string{"controller", "ops"}) {
		t.Fatalf("expected controller and ops, got %v, %v", got, err)
	}
	if _, err := ConnectedUsers([]byte("nope")); err == nil {
		t.Fatal("expected an answer that is not JSON refused")
	}
}
