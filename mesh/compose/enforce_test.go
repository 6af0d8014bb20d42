package compose_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// These tests start the real server with the composed configuration and
// check that it, not the client, enforces each grant.

func sample(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// conn is a connection whose permission violations are collected.
type conn struct {
	*nats.Conn
	violations chan error
}

func dial(t *testing.T, s *natstest.Server, user string, opts ...nats.Option) *conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &conn{violations: make(chan error, 16)}
	nc, err := s.Dial(ctx, user, link.WithErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			c.violations <- err
		}
	}), link.WithNATSOptions(opts...))
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	return c
}

// expectViolation waits for the server to refuse subject.
func (c *conn) expectViolation(t *testing.T, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-c.violations:
			if strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: expected the server to refuse %q, no violation seen", c.Opts.User, subject)
		}
	}
}

// expectNoViolation flushes a round trip and checks nothing was refused.
// The server refuses before it answers the flush, and nats.go records the
// refusal as the connection's last error before it reads the pong; the
// error handler runs on another goroutine and may not have run yet, so
// both are read.
func (c *conn) expectNoViolation(t *testing.T) {
	t.Helper()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("%s: unexpected refusal: %v", c.Opts.User, err)
	}
	select {
	case err := <-c.violations:
		t.Fatalf("%s: unexpected refusal: %v", c.Opts.User, err)
	default:
	}
}

func TestEveryComposedUserConnectsAndNoOtherDoes(t *testing.T) {
	m := sample(t)
	s := natstest.Start(t, m)
	for _, p := range compose.Principals(m) {
		dial(t, s, p.User)
	}
	stranger := s.Creds[wire.PersonUser("alice")]
	stranger.URL = wire.BusURL("person.mallory", "pw-person.mallory", s.Addr())
	stranger.Name = "mallory"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if nc, err := link.Dial(ctx, stranger); err == nil {
		nc.Close()
		t.Fatal("expected a user absent from the composition to be refused")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("expected an authorization error, got %v", err)
	}
}

func TestModulePublishesOnlyItsEmits(t *testing.T) {
	s := natstest.Start(t, sample(t))
	sensor := dial(t, s, wire.ModuleUser("node-a", "sensor"))
	if err := sensor.Publish(wire.EventSubject("sensor", "reading"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	sensor.expectNoViolation(t)
	for _, subject := range []string{
		wire.EventSubject("sensor", "forged"),
		wire.EventSubject("logger", "reading"),
		wire.NodeReport("node-a"),
	} {
		if err := sensor.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		sensor.expectViolation(t, subject)
	}
}

// TestModuleSubscribesOnlyItsInbox: what a module consumes reaches it
// through its consumer; a core subscription on the events it consumes is
// refused, since whoever hears a publish hears its reply subject (and,
// serving a tool, could answer it with a forged PubAck).
func TestModuleSubscribesOnlyItsInbox(t *testing.T) {
	s := natstest.Start(t, sample(t))
	logger := dial(t, s, wire.ModuleUser("node-b", "logger"))
	if _, err := logger.SubscribeSync(wire.Under(wire.ModuleInbox("node-b", "logger"))); err != nil {
		t.Fatal(err)
	}
	logger.expectNoViolation(t)
	for _, subject := range []string{
		wire.EventSubject("sensor", "reading"),
		wire.EventSubject("catalog", "anything"),
		wire.NodeDeclare("node-b"),
		wire.Under(wire.ModuleInbox("node-a", "sensor")), // another principal's inbox
		"_INBOX.>",
	} {
		if _, err := logger.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		logger.expectViolation(t, subject)
	}
}

func TestToolCallsReachOnlyGrantedTools(t *testing.T) {
	s := natstest.Start(t, sample(t))
	catalog := dial(t, s, wire.ModuleUser("node-a", "mesh-catalog"))
	if _, err := catalog.QueueSubscribe(wire.ToolSubject("mesh-catalog", "catalog_tools"), wire.ToolQueue("mesh-catalog", "catalog_tools"),
		func(msg *nats.Msg) { _ = msg.Respond([]byte(`["sensor.calibrate"]`)) }); err != nil {
		t.Fatal(err)
	}
	catalog.expectNoViolation(t)

	// logger uses the seat mesh-catalog, held by catalog: it may call, and
	// the answer reaches its own inbox through allow_responses.
	logger := dial(t, s, wire.ModuleUser("node-b", "logger"))
	reply, err := logger.Request(wire.ToolSubject("mesh-catalog", "catalog_tools"), []byte(`{}`), 5*time.Second)
	if err != nil {
		t.Fatalf("logger calling catalog_tools: %v", err)
	}
	if string(reply.Data) != `["sensor.calibrate"]` {
		t.Fatalf("expected the catalog's answer, got %q", reply.Data)
	}
	catalog.expectNoViolation(t)

	// alice may call sensor.calibrate and ask the catalogue, as every
	// person may, and nothing else: not logger's consumer, not a tool
	// nobody declared.
	alice := dial(t, s, wire.PersonUser("alice"))
	if _, err := alice.Request(wire.ToolSubject("mesh-catalog", "catalog_tools"), []byte(`{}`), 5*time.Second); err != nil {
		t.Fatalf("alice asking the catalogue: %v", err)
	}
	alice.expectNoViolation(t)
	for _, subject := range []string{wire.ToolSubject("sensor", "reset"), wire.ConsumerNext(wire.StreamEvents, wire.ModuleConsumer("node-b", "logger"))} {
		if err := alice.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		alice.expectViolation(t, subject)
	}

	// The catalog may answer only what it was asked: a bare publish to
	// someone's inbox is refused.
	if err := catalog.Publish(wire.PersonInbox("alice")+".x", nil); err != nil {
		t.Fatal(err)
	}
	catalog.expectViolation(t, wire.PersonInbox("alice")+".x")
}

func TestModuleAcksOnlyItsOwnConsumer(t *testing.T) {
	m := sample(t)
	s := natstest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ctl := dial(t, s, wire.ControllerMeshUser)
	js, err := jetstream.New(ctl.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamEvents, Subjects: []string{wire.SubjectModuleEvents}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	logger, _ := m.Module("logger")
	consumer := wire.ModuleConsumer("node-b", "logger")
	if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{
		Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: compose.ConsumerFilters(logger),
	}); err != nil {
		t.Fatal(err)
	}

	sensor := dial(t, s, wire.ModuleUser("node-a", "sensor"))
	sjs, _ := jetstream.New(sensor.Conn)
	if _, err := sjs.Publish(ctx, wire.EventSubject("sensor", "reading"), []byte(`{"v":1}`)); err != nil {
		t.Fatalf("sensor emitting through JetStream: %v", err)
	}

	// The logger binds and fetches its own consumer.
	lg := dial(t, s, wire.ModuleUser("node-b", "logger"))
	ljs, _ := jetstream.New(lg.Conn)
	cons, err := ljs.Consumer(ctx, wire.StreamEvents, consumer)
	if err != nil {
		t.Fatalf("logger binding its consumer: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var delivery jetstream.Msg
	for msg := range batch.Messages() {
		delivery = msg
	}
	if delivery == nil {
		t.Fatal("expected one delivery to the logger")
	}

	// The sensor acking the logger's delivery is refused by the server.
	ackSubject := delivery.Reply()
	if err := sensor.Publish(ackSubject, []byte("+ACK")); err != nil {
		t.Fatal(err)
	}
	sensor.expectViolation(t, ackSubject)
	// The sensor cannot fetch from it either.
	next := wire.ConsumerNext(wire.StreamEvents, consumer)
	if err := sensor.PublishRequest(next, wire.ModuleInbox("node-a", "sensor")+".x", []byte(`{"batch":1}`)); err != nil {
		t.Fatal(err)
	}
	sensor.expectViolation(t, next)

	// Its owner's ack is accepted and the message leaves the consumer.
	if err := delivery.DoubleAck(ctx); err != nil {
		t.Fatalf("logger acking its own delivery: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Fatalf("expected nothing pending after the owner's ack, got %d", info.NumAckPending)
	}
}

func TestReloadAddsAndRevokes(t *testing.T) {
	m := sample(t)
	s := natstest.Start(t, m)
	// Without reconnecting, the connection closes exactly when the server
	// closes it, rather than after the client gives up retrying.
	alice := dial(t, s, wire.PersonUser("alice"), nats.NoReconnect())
	closed := make(chan struct{})
	alice.SetClosedHandler(func(*nats.Conn) { close(closed) })

	changed := *m
	changed.Persons = []meshdesc.Person{{Name: "bob", Tools: []string{"*"}}, {Name: "carol", Tools: []string{"sensor.calibrate"}}}
	if err := changed.Validate(); err != nil {
		t.Fatal(err)
	}
	revoked := s.Creds[wire.PersonUser("alice")]
	s.Apply(&changed)

	dial(t, s, wire.PersonUser("carol"))
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("expected alice's open connection to be closed on revocation")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if nc, err := link.Dial(ctx, revoked, link.WithNATSOptions(nats.NoReconnect())); err == nil {
		nc.Close()
		t.Fatal("expected a revoked user to be refused")
	}
}

// TestTheBuildPathsPrincipalsReachTheirSubjectsAlone: the builder may
// take work through its own consumer, ask a repository, store artifacts
// and say what it built; a repository may announce its own revisions and
// answer fetches; a host may read the chunks of the artifacts declared
// to its node, and no other's. Each is refused the rest by the server.
func TestTheBuildPathsPrincipalsReachTheirSubjectsAlone(t *testing.T) {
	m := sample(t)
	installed := wire.Digest([]byte("sensor at r2"))
	for i := range m.Modules {
		if m.Modules[i].Name == "sensor" {
			m.Modules[i].Artifact = installed
		}
	}
	s := natstest.Start(t, m)

	b := dial(t, s, wire.BuilderUser)
	for _, subject := range []string{wire.SubjectBuilt, wire.ArtifactChunk(installed, 0), wire.SourceFetch("modules"),
		wire.ConsumerNext(wire.StreamBuilds, wire.BuildsConsumer)} {
		if err := b.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	b.expectNoViolation(t)
	for _, subject := range []string{wire.SubjectPush, wire.SubjectBuildRequest, wire.NodeDeclare("node-a"), wire.SubjectEnrol,
		wire.SourceChanged("modules"), "$JS.API.STREAM.INFO." + wire.StreamBuilds, wire.ConsumerNext(wire.StreamControl, wire.ControlConsumer)} {
		if err := b.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		b.expectViolation(t, subject)
	}

	src := dial(t, s, wire.SourceUser("modules"))
	if err := src.Publish(wire.SourceChanged("modules"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := src.SubscribeSync(wire.SourceFetch("modules")); err != nil {
		t.Fatal(err)
	}
	src.expectNoViolation(t)
	for _, subject := range []string{wire.SourceChanged("other"), wire.SubjectBuilt, wire.SubjectBuildRequest, wire.ArtifactChunk(installed, 0)} {
		if err := src.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		src.expectViolation(t, subject)
	}

	hostA := dial(t, s, wire.HostUser("node-a"))
	if err := hostA.Publish(wire.DirectGetLast(wire.StreamArtifacts, wire.ArtifactChunk(installed, 3)), nil); err != nil {
		t.Fatal(err)
	}
	hostA.expectNoViolation(t)
	other := wire.DirectGetLast(wire.StreamArtifacts, wire.ArtifactChunk(wire.Digest([]byte("something else")), 0))
	for _, h := range []*conn{hostA, dial(t, s, wire.HostUser("node-b"))} {
		if err := h.Publish(other, nil); err != nil {
			t.Fatal(err)
		}
		h.expectViolation(t, other)
	}
	hostB := dial(t, s, wire.HostUser("node-b"))
	mine := wire.DirectGetLast(wire.StreamArtifacts, wire.ArtifactChunk(installed, 0))
	if err := hostB.Publish(mine, nil); err != nil {
		t.Fatal(err)
	}
	hostB.expectViolation(t, mine)
}

// TestABuildersFetchIsAnsweredAcrossTheAccounts: the builder, in the
// control account, asks a repository, in the sources' account, and has
// its answer: the fetch crosses as an exported stream with the builder's
// inbox as its reply, and the answer comes back through the service
// export of the builder's inboxes. A repository that answered whatever
// reply a fetch named (the stand-in did, with allow_responses, in the
// control account) is refused by the server anywhere else: a fetch aimed
// at the control plane's subjects, an artifact's chunk among them,
// changes none of its streams.
func TestABuildersFetchIsAnsweredAcrossTheAccounts(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	src := dial(t, s, wire.SourceUser("modules"))
	if _, err := src.Subscribe(wire.SourceFetch("modules"), func(m *nats.Msg) {
		_ = m.Respond([]byte("revision r2"))
	}); err != nil {
		t.Fatal(err)
	}
	src.expectNoViolation(t)
	b := dial(t, s, wire.BuilderUser)
	before := reading(t, ctl)
	for _, target := range targets {
		if err := b.PublishRequest(wire.SourceFetch("modules"), target, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	// The repository answers in arrival order: once an ordinary fetch has
	// its answer, the aimed ones have had theirs tried.
	msg, err := b.Request(wire.SourceFetch("modules"), []byte(`{}`), 5*time.Second)
	if err != nil || string(msg.Data) != "revision r2" {
		t.Fatalf("the builder's fetch: %v %v", msg, err)
	}
	unchanged(t, ctl, "a repository's answer", before, b, src)
	for _, subject := range []string{wire.ControllerInbox + ".x", wire.HostInbox("node-a") + ".x", wire.NodeDeclare("node-a")} {
		if err := src.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		src.expectViolation(t, subject)
	}
}
