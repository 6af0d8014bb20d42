package controller

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// bed is one test's mesh: a description, a state directory raised by
// genesis with the server's files pointed at temporary directories, and,
// once started, a nats-server running in-process on a loopback port.
type bed struct {
	t        *testing.T
	m        *meshdesc.Mesh
	meshPath string
	dir      string
	st       *fileStore
	opts     Options
	srv      *server.Server
}

// sampleMesh is the beds' sample with the bus on a free loopback port and
// a second consumer whose manifest consumes overlapping patterns.
func sampleMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m.Bus.Names = []string{"localhost", "127.0.0.1"}
	m.Bus.Port = testutil.FreePort(t)
	m.Bus.Monitor = "127.0.0.1"
	m.Modules = append(m.Modules, meshdesc.Module{Name: "watcher", Consumes: []string{"sensor.alarm.raised", "sensor.alarm.>"}})
	m.Nodes[0].Modules = append(m.Nodes[0].Modules, "watcher")
	return revalidate(t, m)
}

// revalidate round-trips a description through its file format, so that a
// test's edits are checked as a user's would be.
func revalidate(t *testing.T, m *meshdesc.Mesh) *meshdesc.Mesh {
	t.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := meshdesc.Parse(data)
	if err != nil {
		t.Fatalf("test description invalid: %v\n%s", err, data)
	}
	return out
}

func writeMesh(t *testing.T, path string, m *meshdesc.Mesh) {
	t.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newBed runs genesis for m. The composed configuration differs from the
// container's only in where its files and listeners are.
func newBed(t *testing.T, m *meshdesc.Mesh) *bed {
	t.Helper()
	root := t.TempDir()
	b := &bed{t: t, m: m, meshPath: filepath.Join(root, "mesh.yaml"), dir: filepath.Join(root, "state")}
	b.st = newFileStore(b.dir)
	b.opts = Options{
		Logger:     testLogger(t),
		BcryptCost: bcrypt.MinCost,
		// Short, so that a test sees a spent token's user revoked.
		SpentTokenGrace: 2 * time.Second,
		Server: compose.Inputs{
			ConfigDir: filepath.Join(b.dir, NATSDir),
			StoreDir:  filepath.Join(root, "js"),
			Listen:    net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Bus.Port)),
			Monitor:   "127.0.0.1:0", // port 0: no monitoring endpoint in tests
		},
	}
	writeMesh(t, b.meshPath, m)
	if _, err := Genesis(ctxT(t), m, b.st, b.dir, b.opts); err != nil {
		t.Fatalf("genesis: %v", err)
	}
	return b
}

// start runs nats-server in-process on the composed nats.conf.
func (b *bed) start() {
	t := b.t
	t.Helper()
	opts, err := server.ProcessConfigFile(Layout{b.dir}.NATSConfig())
	if err != nil {
		t.Fatalf("process config: %v", err)
	}
	opts.NoSigs = true
	opts.NoLog = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready within 10s")
	}
	b.srv = s
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
}

func (b *bed) credential(user string) wire.Credential {
	b.t.Helper()
	data, err := os.ReadFile(Layout{b.dir}.Credential(user))
	if err != nil {
		b.t.Fatal(err)
	}
	c, err := wire.ParseCredential(data)
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// dial connects as user with its credential, through the pinned TLS.
func (b *bed) dial(user string) (*nats.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return link.Dial(ctx, b.credential(user))
}

// js is JetStream as the controller, through its user in each account,
// which the test uses both to observe the server and to make it drift.
func (b *bed) js() routed {
	b.t.Helper()
	out := natsplane.JetStreams{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		nc, err := b.dial(user)
		if err != nil {
			b.t.Fatalf("dial as %s: %v", user, err)
		}
		b.t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			b.t.Fatal(err)
		}
		out[b.credential(user).Account()] = js
	}
	return routed{out}
}

// routed reaches each stream through the account it lives in, so a test
// can name streams without saying where they are.
type routed struct{ natsplane.JetStreams }

func (r routed) of(stream string) jetstream.JetStream {
	js, err := r.For(stream)
	if err != nil {
		panic(err)
	}
	return js
}

func (r routed) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return r.of(name).Stream(ctx, name)
}

func (r routed) CreateStream(ctx context.Context, c jetstream.StreamConfig) (jetstream.Stream, error) {
	return r.of(c.Name).CreateStream(ctx, c)
}

func (r routed) UpdateStream(ctx context.Context, c jetstream.StreamConfig) (jetstream.Stream, error) {
	return r.of(c.Name).UpdateStream(ctx, c)
}

func (r routed) DeleteStream(ctx context.Context, name string) error {
	return r.of(name).DeleteStream(ctx, name)
}

func (r routed) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	return r.of(stream).Consumer(ctx, stream, name)
}

func (r routed) CreateConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return r.of(stream).CreateConsumer(ctx, stream, c)
}

func (r routed) UpdateConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return r.of(stream).UpdateConsumer(ctx, stream, c)
}

func (r routed) DeleteConsumer(ctx context.Context, stream, name string) error {
	return r.of(stream).DeleteConsumer(ctx, stream, name)
}

// assert runs one assertion with the default policy.
func (b *bed) assert(js routed) (natsplane.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return natsplane.Assert(ctx, js.JetStreams, natsplane.DesiredState(b.m, natsplane.DefaultPolicy()), nil)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dialWith(c wire.Credential) (*nats.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return link.Dial(ctx, c)
}

// testLogger writes log lines to t's log, shown when the test fails,
// beside the test that made them, until the test's cleanups are done
// (registered first, so run last); a line after that is dropped, since a
// test's log may not be written once it has completed.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLog{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, nil))
}

type testLog struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testLog) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// nextWithin pulls one message from cons, waiting up to d. A pull answered
// "no responders" is tried again: the server answers so for a moment while
// a configuration reload (a user added, as a token's issue does) re-wires
// the account's JetStream API, and the consumers of the code under test
// (Consume) ride over that moment the same way.
func nextWithin(cons jetstream.Consumer, d time.Duration) (jetstream.Msg, error) {
	deadline := time.Now().Add(d)
	for {
		wait := time.Until(deadline)
		if wait < time.Second {
			wait = time.Second
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(wait))
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return msg, err
	}
}

// bus connects as the controller to the bed's server, asserting nothing,
// closed when the test ends.
func (b *bed) bus() *natsplane.Controller {
	b.t.Helper()
	ctx := ctxT(b.t)
	c, err := natsplane.DialController(ctx, b.credential(wire.ControllerUser), b.credential(wire.ControllerMeshUser), natsplane.ControllerOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = c.Close() })
	return c
}

// startNATS is Start on the bed's NATS, with the controller's connections
// at hand for a test that looks at the bus beside it.
func startNATS(ctx context.Context, m *meshdesc.Mesh, st Store, o RunOptions) (*natsplane.Controller, Report, error) {
	bus, rep, err := Start(ctx, m, st, o)
	if err != nil {
		return nil, rep, err
	}
	return bus.(*natsplane.Controller), rep, nil
}
