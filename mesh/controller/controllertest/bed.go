// Package controllertest is the controller's test bed: a state directory
// raised by genesis and an in-process nats-server on the configuration it
// composed, shared by the tests of rollout, control, status and the
// controller itself.
package controllertest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bed is one test's mesh: a description, a state directory raised by
// genesis with the server's files pointed at temporary directories, and,
// once started, a nats-server running in-process on a loopback port.
type Bed struct {
	T        *testing.T
	M        *meshdesc.Mesh
	MeshPath string
	Dir      string
	St       store.Store
	Opts     rollout.Options
	Srv      *server.Server
}

// root is the repository's root, found from this file, so that a test
// of any package below it reads the same sample.
var root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}()

// SampleMesh is the beds' sample with the bus on a free loopback port and
// a second consumer whose manifest consumes overlapping patterns.
func SampleMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join(root, "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m.Bus.Names = []string{"localhost", "127.0.0.1"}
	m.Bus.Port = testutil.FreePort(t)
	m.Bus.Monitor = "127.0.0.1"
	m.Modules = append(m.Modules, meshdesc.Module{Name: "watcher", Consumes: []string{"sensor.alarm.raised", "sensor.alarm.>"}})
	m.Nodes[0].Modules = append(m.Nodes[0].Modules, "watcher")
	return Revalidate(t, m)
}

// Revalidate round-trips a description through its file format, so that a
// test's edits are checked as a user's would be.
func Revalidate(t testing.TB, m *meshdesc.Mesh) *meshdesc.Mesh {
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

// WriteMesh writes m to path as a user would.
func WriteMesh(t *testing.T, path string, m *meshdesc.Mesh) {
	t.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// NewBed runs genesis for m. The composed configuration differs from the
// container's only in where its files and listeners are.
func NewBed(t *testing.T, m *meshdesc.Mesh) *Bed {
	t.Helper()
	root := t.TempDir()
	b := &Bed{T: t, M: m, MeshPath: filepath.Join(root, "mesh.yaml"), Dir: filepath.Join(root, "state")}
	b.St = store.FileStore(b.Dir)
	b.Opts = rollout.Options{
		Logger:     Logger(t),
		BcryptCost: bcrypt.MinCost,
		// Short, so that a test sees a spent token's user revoked.
		SpentTokenGrace: 2 * time.Second,
		Server: compose.Inputs{
			ConfigDir: filepath.Join(b.Dir, statedir.NATSDir),
			StoreDir:  filepath.Join(root, "js"),
			Listen:    net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Bus.Port)),
			Monitor:   "127.0.0.1:0", // port 0: no monitoring endpoint in tests
		},
	}
	WriteMesh(t, b.MeshPath, m)
	if _, err := rollout.Genesis(Ctx(t), m, b.St, b.Dir, b.Opts); err != nil {
		t.Fatalf("genesis: %v", err)
	}
	return b
}

// Start runs nats-server in-process on the composed nats.conf.
func (b *Bed) Start() {
	t := b.T
	t.Helper()
	opts, err := server.ProcessConfigFile(statedir.Layout{Dir: b.Dir}.NATSConfig())
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
	b.Srv = s
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
}

// Credential is user's credential document from the state directory.
func (b *Bed) Credential(user string) wire.Credential {
	b.T.Helper()
	data, err := os.ReadFile(statedir.Layout{Dir: b.Dir}.Credential(user))
	if err != nil {
		b.T.Fatal(err)
	}
	c, err := wire.ParseCredential(data)
	if err != nil {
		b.T.Fatal(err)
	}
	return c
}

// Dial connects as user with its credential, through the pinned TLS.
func (b *Bed) Dial(user string) (*nats.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return link.Dial(ctx, b.Credential(user))
}

// JS is JetStream as the controller, through its user in each account,
// which the test uses both to observe the server and to make it drift.
func (b *Bed) JS() Routed {
	b.T.Helper()
	out := natsplane.JetStreams{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		nc, err := b.Dial(user)
		if err != nil {
			b.T.Fatalf("dial as %s: %v", user, err)
		}
		b.T.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			b.T.Fatal(err)
		}
		out[b.Credential(user).Account()] = js
	}
	return Routed{out}
}

// Routed reaches each stream through the account it lives in, so a test
// can name streams without saying where they are.
type Routed struct{ natsplane.JetStreams }

// Of is the JetStream of the account stream lives in.
func (r Routed) Of(stream string) jetstream.JetStream {
	js, err := r.For(stream)
	if err != nil {
		panic(err)
	}
	return js
}

// Stream is jetstream.JetStream.Stream in name's account.
func (r Routed) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return r.Of(name).Stream(ctx, name)
}

// CreateStream is jetstream.JetStream.CreateStream in c.Name's account.
func (r Routed) CreateStream(ctx context.Context, c jetstream.StreamConfig) (jetstream.Stream, error) {
	return r.Of(c.Name).CreateStream(ctx, c)
}

// UpdateStream is jetstream.JetStream.UpdateStream in c.Name's account.
func (r Routed) UpdateStream(ctx context.Context, c jetstream.StreamConfig) (jetstream.Stream, error) {
	return r.Of(c.Name).UpdateStream(ctx, c)
}

// DeleteStream is jetstream.JetStream.DeleteStream in name's account.
func (r Routed) DeleteStream(ctx context.Context, name string) error {
	return r.Of(name).DeleteStream(ctx, name)
}

// Consumer is jetstream.JetStream.Consumer in stream's account.
func (r Routed) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	return r.Of(stream).Consumer(ctx, stream, name)
}

// CreateConsumer is jetstream.JetStream.CreateConsumer in stream's account.
func (r Routed) CreateConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return r.Of(stream).CreateConsumer(ctx, stream, c)
}

// UpdateConsumer is jetstream.JetStream.UpdateConsumer in stream's account.
func (r Routed) UpdateConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return r.Of(stream).UpdateConsumer(ctx, stream, c)
}

// DeleteConsumer is jetstream.JetStream.DeleteConsumer in stream's account.
func (r Routed) DeleteConsumer(ctx context.Context, stream, name string) error {
	return r.Of(stream).DeleteConsumer(ctx, stream, name)
}

// Assert runs one assertion with the default policy.
func (b *Bed) Assert(js Routed) (natsplane.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return natsplane.Assert(ctx, js.JetStreams, natsplane.DesiredState(b.M, natsplane.DefaultPolicy()), nil)
}

// Ctx is a context for one step of t, ended after 20s or with t.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// DialWith connects with credential c, through its pinned TLS.
func DialWith(c wire.Credential) (*nats.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return link.Dial(ctx, c)
}

// Logger writes log lines to t's log, shown when the test fails,
// beside the test that made them, until the test's cleanups are done
// (registered first, so run last); a line after that is dropped, since a
// test's log may not be written once it has completed.
func Logger(t *testing.T) *slog.Logger {
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

// NextWithin pulls one message from cons, waiting up to d. A pull answered
// "no responders" is tried again: the server answers so for a moment while
// a configuration reload (a user added, as a token's issue does) re-wires
// the account's JetStream API, and the consumers of the code under test
// (Consume) ride over that moment the same way.
func NextWithin(cons jetstream.Consumer, d time.Duration) (jetstream.Msg, error) {
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

// Bus connects as the controller to the bed's server, asserting nothing,
// closed when the test ends.
func (b *Bed) Bus() *natsplane.Controller {
	b.T.Helper()
	ctx := Ctx(b.T)
	c, err := natsplane.DialController(ctx, b.Credential(wire.ControllerUser), b.Credential(wire.ControllerMeshUser), natsplane.ControllerOptions{})
	if err != nil {
		b.T.Fatal(err)
	}
	b.T.Cleanup(func() { _ = c.Close() })
	return c
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		<-tick.C
	}
}

// Watch reloads the in-process server whenever nats.conf changes from
// what the server loaded. The baseline is taken here, before Watch
// returns, as mesh-nats primes its own before the server starts: taken in
// the goroutine, on a loaded machine it was read after the test's next
// step had already composed a change (a person issued), which then never
// reached the server ("not within 10s: person.carol connects").
func (b *Bed) Watch() {
	t := b.T
	done := make(chan struct{})
	var wg sync.WaitGroup
	last, _ := os.ReadFile(statedir.Layout{Dir: b.Dir}.NATSConfig())
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now, err := os.ReadFile(statedir.Layout{Dir: b.Dir}.NATSConfig())
			if err != nil || bytes.Equal(now, last) {
				continue
			}
			last = now
			if err := b.Srv.Reload(); err != nil {
				t.Errorf("reload: %v", err)
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
}

// Issue issues a token for node and returns it as the node receives it.
func (b *Bed) Issue(node string) wire.Credential {
	b.T.Helper()
	_, doc, err := rollout.IssueToken(Ctx(b.T), b.M, b.St, b.Dir, node, time.Hour, b.Opts)
	if err != nil {
		b.T.Fatal(err)
	}
	c, err := wire.ParseCredential(doc)
	if err != nil {
		b.T.Fatal(err)
	}
	return c
}

// Claim is a claim of a token issued for node, by a node with a new
// sealing key, answered under the token's inbox.
func (b *Bed) Claim(node string) (wire.Credential, seal.Key, wire.EnrolRequest) {
	b.T.Helper()
	tok := b.Issue(node)
	key, err := seal.NewKey()
	if err != nil {
		b.T.Fatal(err)
	}
	return tok, key, wire.EnrolRequest{Token: tok.Name, Proof: tok.Password(), SealingKey: seal.EncodePublic(key.Public), Reply: wire.EnrolInbox(tok.Name) + ".r"}
}

// EnrolWith runs the host's side of the handshake as the host does,
// asking again while the claim was not sent: the token's user not yet
// live, or the connection closed by a reload it was caught in.
func EnrolWith(t *testing.T, token wire.Credential) (wire.Credential, seal.Key, error) {
	return EnrolWithin(t, token, 20*time.Second)
}

// EnrolWithin is EnrolWith, giving up after d.
func EnrolWithin(t *testing.T, token wire.Credential, d time.Duration) (wire.Credential, seal.Key, error) {
	t.Helper()
	key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		cred, err := host.Enrol(ctx, token, key)
		if err == nil || !(errors.Is(err, host.ErrNotSent) || errors.Is(err, host.ErrNoAnswer)) || ctx.Err() != nil {
			return cred, key, err
		}
	}
}

// DialEventually connects with cred once the server has loaded its user.
func DialEventually(t *testing.T, cred wire.Credential) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	Eventually(t, 10*time.Second, cred.User()+" connects", func() bool {
		var err error
		nc, err = DialWith(cred)
		return err == nil
	})
	t.Cleanup(nc.Close)
	return nc
}

// StartBus connects as the controller to the bed's started server and
// asserts what the description needs there: what controller.Start does once the bus
// is up, for a test that wires the controller's parts itself. o tunes the
// connection and the policy asserted.
func (b *Bed) StartBus(ctx context.Context, o natsplane.ControllerOptions) (*natsplane.Controller, error) {
	c, err := natsplane.DialController(ctx, b.Credential(wire.ControllerUser), b.Credential(wire.ControllerMeshUser), o)
	if err != nil {
		return nil, err
	}
	if _, err := c.Assert(ctx, b.M); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
