package natsplane_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/linktest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestContract runs the control plane's contract on the real nats-server,
// in-process, with the mesh's composed configuration.
func TestContract(t *testing.T) {
	linktest.Run(t, raiseNATS)
}

// buildsAckWait is BUILDS' ack wait on the contract's bus: shorter than
// the 2 s the contract waits for a second builder (linktest.Bus.Builder),
// so that only the first's saying it is at work (the builder's
// NextBuild, every third of it) keeps the request its, and a dead one's
// request is taken again soon.
const buildsAckWait = time.Second

// natsBus is the sample mesh's bus, composed as the controller composes
// it, with the controller connected and the streams asserted.
type natsBus struct {
	t    *testing.T
	srv  *natstest.Server
	cur  *server.Server // the server running now: srv's, or the one Back started
	addr string
	ctl  *natsplane.Controller
	done atomic.Bool // the test's cleanups are running: its log is closed
}

// eventsMaxDeliver is how often EVENTS' module consumers deliver an event
// on the contract's bus before they give it up.
const eventsMaxDeliver = 2

var (
	_ linktest.Enrolling     = (*natsBus)(nil)
	_ linktest.Outage        = (*natsBus)(nil)
	_ linktest.DeadLettering = (*natsBus)(nil)
	_ linktest.Provisioning  = (*natsBus)(nil)
)

// provider is the module that provides on the contract's bus: the sample
// mesh has none, so its sensor is made one, and may emit the provisioner
// events (meshdesc.Module.AllEmits).
const provider = "sensor"

// withProvider makes provider a provider of m.
func withProvider(t *testing.T, m *meshdesc.Mesh) *meshdesc.Mesh {
	t.Helper()
	for i := range m.Modules {
		if m.Modules[i].Name == provider {
			m.Modules[i].Provides = []string{"store"}
			return m
		}
	}
	t.Fatalf("the sample mesh has no module %s", provider)
	return nil
}

func raiseNATS(t *testing.T) linktest.Bus {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m = withProvider(t, m)
	srv := natstest.Start(t, m)
	b := &natsBus{t: t, srv: srv, cur: srv.Server, addr: srv.Addr()}
	t.Cleanup(func() { b.done.Store(true) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := natsplane.DefaultPolicy()
	p.BuildsAckWait = buildsAckWait
	p.EventsMaxDeliver = eventsMaxDeliver
	b.ctl, err = natsplane.DialController(ctx, srv.Creds[wire.ControllerUser], srv.Creds[wire.ControllerMeshUser], natsplane.ControllerOptions{Policy: p})
	if err != nil {
		t.Fatalf("dial the controller: %v", err)
	}
	t.Cleanup(func() { _ = b.ctl.Close() })
	if _, err := b.ctl.Assert(ctx, m); err != nil {
		t.Fatalf("assert the streams: %v", err)
	}
	return b
}

func (b *natsBus) Nodes() (string, string)          { return "node-a", "node-b" }
func (b *natsBus) Controller() plane.Controller     { return b.ctl }
func (b *natsBus) cred(user string) wire.Credential { return b.srv.Creds[user] }

func (b *natsBus) Host(node string) plane.Host {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := natsplane.DialHost(ctx, b.cred(wire.HostUser(node)), b.errorsToLog())
	if err != nil {
		b.t.Fatalf("dial %s's host: %v", node, err)
	}
	b.t.Cleanup(func() { _ = h.Close() })
	return h
}

func (b *natsBus) Enroller() (plane.Enroller, string) {
	tok := b.cred(wire.EnrolUser("tok-node-c"))
	return natsplane.NewEnroller(tok), tok.Name
}

// Away shuts the server down; its JetStream store stays on disk.
func (b *natsBus) Away() {
	b.cur.Shutdown()
	b.cur.WaitForShutdown()
}

// Back starts the server again on the same configuration, address and
// store.
func (b *natsBus) Back() {
	b.t.Helper()
	opts, err := server.ProcessConfigFile(b.srv.ConfigPath)
	if err != nil {
		b.t.Fatalf("process config: %v", err)
	}
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		b.t.Fatal(err)
	}
	opts.Host = host
	if opts.Port, err = strconv.Atoi(port); err != nil {
		b.t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		b.t.Fatalf("new server: %v", err)
	}
	s.Start()
	b.t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		b.t.Fatal("the server not back within 10s")
	}
	b.cur = s
}

// errorsToLog has a connection's asynchronous errors (a permission
// violation a body provokes on purpose) in the test's log rather than on
// stderr, until the test's cleanups are done.
func (b *natsBus) errorsToLog() link.Option {
	return link.WithErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
		if !b.done.Load() {
			b.t.Logf("%s: %v", nc.Opts.Name, err)
		}
	})
}

// dial connects as user, closed when the test ends.
func (b *natsBus) dial(user string) jetstream.JetStream {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := link.Dial(ctx, b.cred(user), b.errorsToLog())
	if err != nil {
		b.t.Fatalf("dial as %s: %v", user, err)
	}
	b.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.t.Fatal(err)
	}
	return js
}

// Poison has node-a's sensor emit a reading and node-b's logger, which
// consumes readings, nak each delivery of it until its consumer gives it
// up (eventsMaxDeliver): the server's max-deliveries advisory lands in
// DEAD.
func (b *natsBus) Poison(eventID string) (consumer, subject string, deliveries int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject, consumer = wire.EventSubject("sensor", "reading"), wire.ModuleConsumer("node-b", "logger")
	msg := nats.NewMsg(subject)
	msg.Header.Set(wire.HeaderEventID, eventID)
	msg.Data = []byte(`{}`)
	if _, err := b.dial(wire.ModuleUser("node-a", "sensor")).PublishMsg(ctx, msg, jetstream.WithMsgID(eventID)); err != nil {
		b.t.Fatalf("emit %s: %v", eventID, err)
	}
	cons, err := b.dial(wire.ModuleUser("node-b", "logger")).Consumer(ctx, wire.StreamEvents, consumer)
	if err != nil {
		b.t.Fatalf("bind %s: %v", consumer, err)
	}
	for range eventsMaxDeliver {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			b.t.Fatalf("expected event %s delivered to %s, got %v", eventID, consumer, err)
		}
		if got := m.Headers().Get(wire.HeaderEventID); got != eventID {
			b.t.Fatalf("expected event %s delivered to %s, got %s", eventID, consumer, got)
		}
		if err := m.Nak(); err != nil {
			b.t.Fatalf("nak %s: %v", eventID, err)
		}
	}
	// The server gives the event up when it would deliver it once more:
	// a pull after the last nak makes it, and gets nothing.
	if m, err := cons.Next(jetstream.FetchMaxWait(time.Second)); err == nil {
		b.t.Fatalf("expected event %s given up after %d deliveries, got %s delivered again", eventID, eventsMaxDeliver, m.Headers().Get(wire.HeaderEventID))
	}
	return consumer, subject, eventsMaxDeliver
}

// Provide has node-a's provider emit a provisioner event into EVENTS with
// its own credential, the event id as message id.
func (b *natsBus) Provide(key, eventID string, body []byte) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subject := wire.EventSubject(provider, key)
	msg := nats.NewMsg(subject)
	msg.Header.Set(wire.HeaderEventID, eventID)
	msg.Header.Set(wire.HeaderContentType, wire.ContentTypeJSON)
	msg.Data = body
	if _, err := b.dial(wire.ModuleUser("node-a", provider)).PublishMsg(ctx, msg, jetstream.WithMsgID(eventID)); err != nil {
		b.t.Fatalf("emit %s as %s: %v", subject, provider, err)
	}
	return subject
}

// Builder is the builder connected as itself through the seam
// (natsplane.DialBuilder), as mesh-build connects.
func (b *natsBus) Builder() plane.Builder {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bl, err := natsplane.DialBuilder(ctx, b.cred(wire.BuilderUser), b.errorsToLog())
	if err != nil {
		b.t.Fatalf("dial the builder: %v", err)
	}
	b.t.Cleanup(func() { _ = bl.Close() })
	return bl
}

// Source is the sample mesh's repository connected as itself.
func (b *natsBus) Source() (plane.Source, string) {
	b.t.Helper()
	const repo = "modules"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natsplane.DialSource(ctx, b.cred(wire.SourceUser(repo)), b.errorsToLog())
	if err != nil {
		b.t.Fatalf("dial repository %s: %v", repo, err)
	}
	b.t.Cleanup(func() { _ = s.Close() })
	return s, repo
}
