package harness

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/harness/nats"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/internal/testutil"
)

// TestNATSContainer raises the nats container alone, on a hand-written
// configuration (no TLS, no controller), and checks the handle: readiness,
// the bus address, the processes, a restart, and the probe from both
// networks against monitoring bound to the private network only.
func TestNATSContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, c := natsAlone(t, ctx)

	addr, err := c.BusAddress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("expected a loopback bus address, got %s", addr)
	}
	nc, err := natsgo.Connect("nats://"+addr, natsgo.Timeout(5*time.Second), natsgo.UserInfo("t", "pw"))
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	if _, err := nc.JetStream(); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	h, err := c.Handle(RoleNATS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Handle("store"); err == nil {
		t.Fatal("expected an unknown role to be refused")
	}
	before, err := h.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !before.Running || before.Pid == 0 || before.StartedAt.IsZero() {
		t.Fatalf("expected a running container with a pid and a start time, got %+v", before)
	}
	server := natsServer(t, ctx, h)
	if server.PPID != before.Pid {
		t.Fatalf("expected nats-server to be the child of the entrypoint (pid %d), got %+v", before.Pid, server)
	}

	for _, p := range []struct {
		network, url string
		ok           bool
	}{
		{Private, "http://nats:8222/varz", true},
		{Outside, "http://nats-outside:8222/varz", false},
	} {
		r, err := c.Probe(ctx, p.network, "http", p.url)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK != p.ok {
			t.Fatalf("expected monitoring %s from %s ok=%v, got %+v", p.url, p.network, p.ok, r)
		}
	}
	if r, err := c.Probe(ctx, Outside, "tcp", "nats-outside:4222"); err != nil || !r.OK {
		t.Fatalf("expected the client port reachable from outside, got %+v, %v", r, err)
	}

	// ReadFile copies a file out as the engine sees it: the bind-mounted
	// configuration as written here, and a missing one is fs.ErrNotExist.
	want, err := c.ReadNATSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.ReadFile(ctx, path.Join(nats.ConfigDir, filepath.Base(c.NATSConfigFile()))); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("expected ReadFile to copy out the configuration as written (%d bytes), got %d bytes, %v", len(want), len(got), err)
	}
	if _, err := h.ReadFile(ctx, nats.ConfigDir+"/absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("expected a missing file to be fs.ErrNotExist, got %v", err)
	}

	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := h.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.StartedAt.After(before.StartedAt) || after.Pid == before.Pid {
		t.Fatalf("expected a new start time and pid after restart, before %+v after %+v", before, after)
	}
	if _, err := c.BusAddress(ctx); err != nil {
		t.Fatal(err)
	}

	logDir := t.TempDir()
	if err := s.SaveLogs(ctx, logDir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nats.log", "probe.log", "probe-3.log"} {
		b, err := os.ReadFile(filepath.Join(logDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "nats.log" && strings.Count(string(b), "Server is ready") != 2 {
			t.Fatalf("expected two readiness lines in nats.log (start and restart), got:\n%s", b)
		}
	}
	t.Log(c.Describe())
}

// natsAlone raises the nats container alone, on the smallest
// configuration the entrypoint applies (no TLS, no controller): user t,
// password pw. The session is closed when the test ends, and must leave
// nothing behind.
func natsAlone(t *testing.T, ctx context.Context) (*Session, *Cluster) {
	t.Helper()
	testutil.DockerClient(t)
	s, err := NewSession(ctx, SessionOptions{Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		if c, n := leftovers(t, s.docker, s.ID()); c+n != 0 {
			t.Errorf("expected nothing of run %s after Close, got %d containers and %d networks", s.ID(), c, n)
		}
	})

	c := &Cluster{
		s: s, state: filepath.Join(s.work, "state"), meshDir: filepath.Join(s.work, "mesh"), js: filepath.Join(s.work, "js"),
		poll: 200 * time.Millisecond, readyTimeout: time.Minute,
		networks: map[string]string{Private: "mesh-" + s.id, Outside: "mesh-" + s.id + "-outside"},
		roles:    map[string]*Handle{},
	}
	for _, d := range []string{filepath.Join(c.state, "nats"), c.js} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The entrypoint applies only a whole JSON configuration with users in
	// every account (docs/nats-entrypoint.md): the smallest such file.
	conf := `{"listen": "0.0.0.0:4222", "http": "nats:8222", "jetstream": {"store_dir": "/data"},
  "accounts": {"T": {"jetstream": "enabled", "users": [{"user": "t", "password": "pw"}]}}}
`
	if err := os.WriteFile(filepath.Join(c.state, "nats", "nats.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.topology = topology.Genesis()
	bus, _ := c.topology.Named(MemberBus)
	for _, step := range []func(context.Context) error{c.ensureImages, c.createNetworks, func(ctx context.Context) error { return c.startNATS(ctx, bus) }} {
		if err := step(ctx); err != nil {
			_ = s.SaveLogs(ctx, t.TempDir())
			t.Fatal(err)
		}
	}

	return s, c
}

// natsServer finds the nats-server process in the container.
func natsServer(t *testing.T, ctx context.Context, h *Handle) Process {
	t.Helper()
	ps, err := h.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Command, "/nats-server") {
			return p
		}
	}
	t.Fatalf("expected a nats-server process, got %+v", ps)
	return Process{}
}

// testWriter sends narration to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
