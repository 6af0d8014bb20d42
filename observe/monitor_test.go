package observe

import (
	"context"
	"io"
	"net/http"
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
	if err != nil || !after.ConfigLoadTime.After(v.ConfigLoadTime) || !after.Start.Equal(v.Start) {
		t.Fatalf("a reload: expected a later load time and the same start, got %+v then %+v (%v)", v, after, err)
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
