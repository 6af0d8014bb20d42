package compose_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The reply subject is a capability the server never checks (NATS-NOTES,
// permissions): a responder's answer, the JetStream API's statuses and a
// stream's PubAck all go where the sender's reply names. These tests try
// each route against the composed configuration and hold the server to
// keeping the control plane's streams out of reach of every principal
// outside the control account (docs/decisions/0001-accounts.md).

// controlStreams asserts every stream and consumer as the controller
// does (natsplane.Assert of its DesiredState: a stream added later is
// made here too), puts node-b's declaration in NODES and stores an
// artifact in ARTIFACTS, as the builder does: what a successful route
// would replace or evict. It returns JetStream in the control and the
// mesh accounts, and the targets to aim at: observe.ControlTargets, and
// the artifact's first chunk.
func controlStreams(t *testing.T, s *natstest.Server) (ctl, mesh jetstream.JetStream, targets []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctl, _ = jetstream.New(dial(t, s, wire.ControllerUser).Conn)
	mesh, _ = jetstream.New(dial(t, s, wire.ControllerMeshUser).Conn)
	js := natsplane.JetStreams{wire.AccountControl: ctl, wire.AccountMesh: mesh}
	if _, err := natsplane.Assert(ctx, js, natsplane.DesiredState(sample(t), natsplane.DefaultPolicy()), nil); err != nil {
		t.Fatal(err)
	}
	// node-b's declaration, which a successful route would replace.
	if _, err := ctl.Publish(ctx, wire.NodeDeclare("node-b"), []byte(`{"node":"node-b","modules":["logger"]}`)); err != nil {
		t.Fatal(err)
	}
	builder, _ := jetstream.New(dial(t, s, wire.BuilderUser).Conn)
	digest, _, err := artifact.Put(ctx, builder, []byte("the program of a module"))
	if err != nil {
		t.Fatal(err)
	}
	return ctl, mesh, append(observe.ControlTargets("node-b"), wire.ArtifactChunk(digest, 0))
}

// reading is what the control streams hold (observe.Hold).
func reading(t *testing.T, js jetstream.JetStream) observe.Holding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := observe.Hold(ctx, js, observe.ControlStreams)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// unchanged flushes the connections that aimed and compares the control
// streams with before.
func unchanged(t *testing.T, js jetstream.JetStream, route string, before observe.Holding, c ...*conn) {
	t.Helper()
	for _, x := range c {
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range before.Changes(reading(t, js)) {
		t.Errorf("%s: %s", route, d)
	}
}

func TestAToolResponderCannotBeAimedAtTheControlPlane(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	// A responder that answers whatever reply it is given, as the SDK did.
	sensor := dial(t, s, wire.ModuleUser("node-a", "sensor"))
	if _, err := sensor.QueueSubscribe(wire.ToolSubject("sensor", "calibrate"), wire.ToolQueue("sensor", "calibrate"),
		func(m *nats.Msg) { _ = m.Respond([]byte(`{"forged":true}`)) }); err != nil {
		t.Fatal(err)
	}
	sensor.expectNoViolation(t)
	alice := dial(t, s, wire.PersonUser("alice"))
	before := reading(t, ctl)
	for _, target := range targets {
		if err := alice.PublishRequest(wire.ToolSubject("sensor", "calibrate"), target, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	// The responder answers one call at a time, in arrival order: once an
	// ordinary call has its answer, the aimed ones have had theirs.
	if _, err := alice.Request(wire.ToolSubject("sensor", "calibrate"), []byte(`{}`), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sensor.Flush(); err != nil {
		t.Fatal(err)
	}
	unchanged(t, ctl, "responder", before, alice, sensor)
}

func TestTheJetStreamAPICannotBeAimedAtTheControlPlane(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	logger := dial(t, s, wire.ModuleUser("node-b", "logger"))
	before := reading(t, ctl)
	next := wire.ConsumerNext(wire.StreamEvents, wire.ModuleConsumer("node-b", "logger"))
	for _, target := range targets {
		// no_wait: answered at once with a 404; idle heartbeats: answered
		// again and again until the request expires.
		if err := logger.PublishRequest(next, target, []byte(`{"batch":1,"no_wait":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := logger.PublishRequest(next, target, []byte(`{"batch":1,"expires":1000000000,"idle_heartbeat":100000000}`)); err != nil {
			t.Fatal(err)
		}
		info := wire.ConsumerInfo(wire.StreamEvents, wire.ModuleConsumer("node-b", "logger"))
		if err := logger.PublishRequest(info, target, nil); err != nil {
			t.Fatal(err)
		}
	}
	logger.expectNoViolation(t)
	// Past the requests' expiry: every heartbeat they could send is sent.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		unchanged(t, ctl, "jetstream api", before, logger)
		if t.Failed() {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a window the heartbeats fill
	}
}

func TestAPubAckCannotBeAimedAtTheControlPlane(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	sensor := dial(t, s, wire.ModuleUser("node-a", "sensor"))
	before := reading(t, ctl)
	for _, target := range targets {
		if err := sensor.PublishRequest(wire.EventSubject("sensor", "reading"), target, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	sensor.expectNoViolation(t)
	// EVENTS stores and acknowledges in order: once an ordinary publish
	// has its PubAck, the aimed ones have had theirs sent.
	sjs, _ := jetstream.New(sensor.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sjs.Publish(ctx, wire.EventSubject("sensor", "reading"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	unchanged(t, ctl, "emitter's puback", before, sensor)
}

func TestAnEnrolmentUserCannotAimItsPubAckAtTheControlPlane(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	tok := dial(t, s, wire.EnrolUser("tok-node-c"))
	before := reading(t, ctl)
	for _, target := range targets {
		if err := tok.PublishRequest(wire.SubjectEnrol, target, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	tok.expectNoViolation(t)
	// The requests themselves are CONTROL's, on the enrolment subject, and
	// nothing else changed: no PubAck landed anywhere in the control account.
	n := uint64(len(targets))
	want := observe.Holding{}
	for k, v := range before {
		want[k] = v
	}
	want[wire.StreamControl+" messages"] += n
	want[wire.StreamControl+" last sequence"] += n
	want[wire.StreamControl+" "+wire.SubjectEnrol+" messages"] += n
	lastEnrol := wire.StreamControl + " " + wire.SubjectEnrol + " last sequence"
	var after observe.Holding
	for deadline := time.Now().Add(5 * time.Second); ; {
		// The requests cross the import on their own time.
		after = reading(t, ctl)
		if after[wire.StreamControl+" messages"] >= want[wire.StreamControl+" messages"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
	// The enrolment subject's last sequence moves with the requests.
	want[lastEnrol], after[lastEnrol] = 0, 0
	for _, d := range want.Changes(after) {
		t.Errorf("enrolment puback: %s", d)
	}

	// And its PubAck comes back to it, in its own account: the import
	// replaced the reply subject on the way in and restores it on the way out.
	msg, err := tok.Request(wire.SubjectEnrol, []byte(`{}`), 5*time.Second)
	if err != nil {
		t.Fatalf("an enrolment request's PubAck: %v", err)
	}
	if string(msg.Data) == "" {
		t.Fatal("expected CONTROL's PubAck")
	}
}

// TestTheControllerAnswersAnEnrolmentInItsInbox: the enrolment account
// hears the control account's answers on its own inboxes and nothing else.
func TestTheControllerAnswersAnEnrolmentInItsInbox(t *testing.T) {
	s := natstest.Start(t, sample(t))
	tok := dial(t, s, wire.EnrolUser("tok-node-c"))
	sub, err := tok.SubscribeSync(wire.Under(wire.EnrolInbox("tok-node-c")))
	if err != nil {
		t.Fatal(err)
	}
	tok.expectNoViolation(t)
	ctl := dial(t, s, wire.ControllerUser)
	if err := ctl.Publish(wire.EnrolInbox("tok-node-c")+".x", []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	ctl.expectNoViolation(t)
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "sealed" {
		t.Fatalf("expected the controller's answer in the token's inbox, got %v %v", m, err)
	}
}

// TestAHostOrARepositoryCannotAimItsPubAckAtTheControlPlane: issue 18 §2
// — a host's report and a repository's announcement are stored in
// CONTROL, and their PubAcks went where their reply named, within the
// control account: into ARTIFACTS (a chunk overwritten, or the stream
// filled until the artifacts were evicted), NODES, BUILDS or CONTROL
// itself. Each is now a user of an account of its own kind, reaching
// CONTROL through a service import, which gives the request a reply of
// the server's own: the PubAck goes back to the publisher, and the
// control streams hold only the publishes themselves.
func TestAHostOrARepositoryCannotAimItsPubAckAtTheControlPlane(t *testing.T) {
	s := natstest.Start(t, sample(t))
	ctl, _, targets := controlStreams(t, s)
	// The services the control account exports to the hosts are aimed at
	// too: an answer that came back to the hosts' account on one of them
	// must not cross its import again (a heartbeat or a credential request
	// in another node's name). A reply under $JS. (the direct gets) the
	// server refuses outright (isJSReservedReply, v2.15.3).
	targets = append(targets, wire.NodeAlive("node-b"), wire.NodeCredentials("node-b"))
	// The controller hears heartbeats and credential requests: none may
	// come in node-b's name.
	controller := dial(t, s, wire.ControllerUser)
	heard := make(chan *nats.Msg, 64)
	for _, subject := range []string{wire.NodeAlive("node-b"), wire.NodeCredentials("node-b")} {
		if _, err := controller.ChanSubscribe(subject, heard); err != nil {
			t.Fatal(err)
		}
	}
	controller.expectNoViolation(t)
	for _, c := range []struct {
		user, subject string
		// also are the other requests it may make into the control
		// account, aimed the same way: their answers (a direct get's
		// message or status, a no-responders status) go to the reply too.
		also []string
	}{
		{wire.HostUser("node-a"), wire.NodeReport("node-a"), []string{
			wire.DirectGetLast(wire.StreamNodes, wire.NodeDeclare("node-a")), wire.NodeCredentials("node-a"),
		}},
		{wire.SourceUser("modules"), wire.SourceChanged("modules"), nil},
	} {
		before := reading(t, ctl)
		who := dial(t, s, c.user)
		for _, target := range targets {
			for _, subject := range append([]string{c.subject}, c.also...) {
				if err := who.PublishRequest(subject, target, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
		who.expectNoViolation(t)
		// CONTROL stores and acknowledges in order: once an ordinary
		// publish has its PubAck, the aimed ones have had theirs sent.
		js, _ := jetstream.New(who.Conn)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ack, err := js.Publish(ctx, c.subject, []byte(`{}`))
		cancel()
		if err != nil {
			t.Fatalf("%s: an ordinary publish on %s: %v", c.user, c.subject, err)
		}
		if ack.Stream != wire.StreamControl {
			t.Fatalf("%s: acknowledged by %q", c.user, ack.Stream)
		}
		// And each other request, answered in turn, once.
		for _, subject := range c.also {
			if _, err := who.Request(subject, []byte(`{}`), 5*time.Second); err != nil && !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("%s: an ordinary request on %s: %v", c.user, subject, err)
			}
		}
		n := uint64(len(targets)) + 1
		want := observe.Holding{}
		for k, v := range before {
			want[k] = v
		}
		want[wire.StreamControl+" messages"] += n
		want[wire.StreamControl+" last sequence"] += n
		want[wire.StreamControl+" "+c.subject+" messages"] += n
		last := wire.StreamControl + " " + c.subject + " last sequence"
		after := reading(t, ctl)
		want[last], after[last] = 0, 0
		for _, d := range want.Changes(after) {
			t.Errorf("%s's PubAck: %s", c.user, d)
		}
	}
	if err := controller.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-heard:
		t.Errorf("the controller heard %q on %s, in node-b's name", m.Data, m.Subject)
	case <-time.After(200 * time.Millisecond): // anything aimed has long been delivered: the PubAcks after it have come back
	}
}
