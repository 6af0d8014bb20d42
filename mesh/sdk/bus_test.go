package sdk_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// bus is the sample mesh (features/testdata/mesh.yaml) on one bus, as the
// shared test bodies need it: the SDK's contract is written once and run
// on every bus, as etcd runs one test body against several clusters.
// Where the buses genuinely differ, the body says so, by name.
type bus interface {
	// busName is "nats" or "amqp".
	busName() string
	// credential is user's credential document, as the mesh issued it.
	credential(user string) wire.Credential
	// connect connects user through the SDK; it is closed when the test ends.
	connect(tb testing.TB, user string) *sdk.Module
	// fresh is the mesh as declared and empty, its delivery limit
	// busMaxDeliver.
	fresh(t *testing.T) bus
	// storedEvent is what the bus stored of the event source emitted:
	// NATS, the last message EVENTS holds on its subject; AMQP, the next
	// message of the logger's queue, taken as the controller.
	storedEvent(t *testing.T, source, event string) storedEvent
	// settle waits until the logger has been delivered n events and
	// settled every one, none given back.
	settle(t *testing.T, n int)
	// publishRaw publishes an event as user, bypassing the SDK, with these
	// headers; contentType is AMQP's property, empty on NATS.
	publishRaw(t *testing.T, user, source, event string, h map[string]string, contentType string, body []byte)
	// callRaw calls a tool as user, bypassing the SDK, and returns the answer.
	callRaw(t *testing.T, user, module, tool string, args []byte) []byte
	// callAimedAtLogger calls a tool as user, bypassing the SDK, naming as
	// its reply where the logger's events are kept (NATS: the subject of
	// sensor.reading, which EVENTS captures; AMQP: the logger's queue),
	// and returns at once; loggerHolds is how many messages are kept there.
	callAimedAtLogger(t *testing.T, user, module, tool string)
	loggerHolds(t *testing.T) int
	// consumerName is the name of module's events consumer (NATS) or
	// queue (AMQP); dropConsumer deletes it, as the controller;
	// hasConsumer says whether it exists.
	consumerName(node, module string) string
	dropConsumer(t *testing.T, node, module string)
	hasConsumer(t *testing.T, node, module string) bool
}

// storedEvent is an event as the bus holds it.
type storedEvent struct {
	header map[string][]string
	body   []byte
	// delivery is AMQP's message, for what it carries outside the
	// headers; nil on NATS.
	delivery *amqp.Delivery
}

// busMaxDeliver is the delivery limit of a fresh mesh, small so that a
// dead letter comes quickly.
const busMaxDeliver = 3

// busCase is a test body run on every bus.
type busCase struct {
	name string
	run  func(*testing.T, bus)
}

var busCases = []busCase{
	{"ConnectReadsTheCredential", connectReadsTheCredential},
	{"ConnectRefusesAnotherCertificate", connectRefusesAnotherCertificate},
	{"IdentityComesFromTheCredential", identityComesFromTheCredential},
	{"SubscribeWithoutConsumer", subscribeWithoutConsumer},
	{"EmittedEventHeaderByHeader", emittedEventHeaderByHeader},
	{"SubscribeMatchesLocallyAndAcksTheRest", subscribeMatchesLocallyAndAcksTheRest},
	{"DeliveredTwiceHandledOnce", deliveredTwiceHandledOnce},
	{"EnvelopeRefusalsAndUnknownHeaders", envelopeRefusalsAndUnknownHeaders},
	{"FailingHandlerDeadLetters", failingHandlerDeadLetters},
	{"PublishOutsideEmitsIsDenied", publishOutsideEmitsIsDenied},
	{"CloseSettlesTheRunningHandler", closeSettlesTheRunningHandler},
	{"ToolCalls", toolCalls},
	{"ToolQueueGroup", toolQueueGroup},
	{"ToolsOutsideTheGrants", toolsOutsideTheGrants},
	{"AResponderAnswersOnlyACallersInbox", aResponderAnswersOnlyACallersInbox},
	{"ReconnectsAfterTheBusIsAway", reconnectsAfterTheBusIsAway},
}

// amqpCases are what only AMQP has.
var amqpCases = []struct {
	name string
	run  func(*testing.T, *amqpMesh)
}{
	{"NoServiceQueueIsNoResponders", amqpNoServiceQueueIsNoResponders},
	{"OneModuleOnEitherBus", amqpOneModuleOnEitherBus},
}

// TestBus runs the SDK's contract on each bus: on the real nats-server
// in-process, a fresh mesh a case; on a real RabbitMQ carrying the sample
// mesh's definitions (mesh/amqpdefs), one broker for every case, each
// starting from the mesh as declared and empty. The AMQP run is skipped
// where internal/amqptest skips: in -short mode or without Docker.
func TestBus(t *testing.T) {
	t.Run("nats", func(t *testing.T) {
		for _, c := range busCases {
			t.Run(c.name, func(t *testing.T) { c.run(t, startMesh(t, natsplane.DefaultPolicy())) })
		}
	})
	t.Run("amqp", func(t *testing.T) {
		m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		br := amqptest.Start(t, m, amqptest.WithMaxDeliver(busMaxDeliver)) // skips in -short mode or without Docker
		am := &amqpMesh{br: br, admin: br.Dial(t, wire.ControllerMeshUser)}
		for _, c := range busCases {
			t.Run(c.name, func(t *testing.T) {
				br.Reset(ctxFor(t, time.Minute), t)
				c.run(t, am)
			})
		}
		for _, c := range amqpCases {
			t.Run(c.name, func(t *testing.T) {
				br.Reset(ctxFor(t, time.Minute), t)
				c.run(t, am)
			})
		}
	})
}

// NATS.

func (tm *testMesh) busName() string                        { return "nats" }
func (tm *testMesh) credential(user string) wire.Credential { return tm.srv.Creds[user] }

func (tm *testMesh) fresh(t *testing.T) bus {
	p := natsplane.DefaultPolicy()
	p.EventsMaxDeliver = busMaxDeliver
	return startMesh(t, p)
}

func (tm *testMesh) storedEvent(t *testing.T, source, event string) storedEvent {
	t.Helper()
	msg := tm.stored(t, wire.EventSubject(source, event))
	return storedEvent{header: msg.Header, body: msg.Data}
}

func (tm *testMesh) settle(t *testing.T, n int) {
	t.Helper()
	ci := tm.settled(t, uint64(n))
	if ci.NumRedelivered != 0 || ci.Delivered.Consumer != uint64(n) {
		t.Fatalf("expected %d deliveries, none redelivered, got %+v", n, ci)
	}
}

func (tm *testMesh) publishRaw(t *testing.T, user, source, event string, h map[string]string, contentType string, body []byte) {
	t.Helper()
	if contentType != "" {
		t.Fatalf("NATS has no content-type property, got %q", contentType)
	}
	_, js := tm.raw(t, user)
	msg := nats.NewMsg(wire.EventSubject(source, event))
	for name, v := range h {
		msg.Header.Set(name, v)
	}
	msg.Data = body
	if _, err := js.PublishMsg(ctxFor(t, 5*time.Second), msg); err != nil {
		t.Fatal(err)
	}
}

func (tm *testMesh) callRaw(t *testing.T, user, module, tool string, args []byte) []byte {
	t.Helper()
	nc, _ := tm.raw(t, user)
	reply, err := nc.Request(wire.ToolSubject(module, tool), args, 5*time.Second)
	if err != nil {
		t.Fatalf("%s's call of %s.%s: %v", user, module, tool, err)
	}
	return reply.Data
}

func (tm *testMesh) callAimedAtLogger(t *testing.T, user, module, tool string) {
	t.Helper()
	nc, _ := tm.raw(t, user)
	if err := nc.PublishRequest(wire.ToolSubject(module, tool), wire.EventSubject("sensor", "reading"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (tm *testMesh) loggerHolds(t *testing.T) int {
	t.Helper()
	s, err := tm.js.Stream(ctxFor(t, 5*time.Second), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxFor(t, 5*time.Second), jetstream.WithSubjectFilter(wire.EventSubject("sensor", "reading")))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[wire.EventSubject("sensor", "reading")])
}

func (tm *testMesh) consumerName(node, module string) string {
	return wire.ModuleConsumer(node, module)
}

func (tm *testMesh) dropConsumer(t *testing.T, node, module string) {
	t.Helper()
	if err := tm.js.DeleteConsumer(ctxFor(t, 5*time.Second), wire.StreamEvents, wire.ModuleConsumer(node, module)); err != nil {
		t.Fatal(err)
	}
}

func (tm *testMesh) hasConsumer(t *testing.T, node, module string) bool {
	t.Helper()
	_, err := tm.js.Consumer(ctxFor(t, 5*time.Second), wire.StreamEvents, wire.ModuleConsumer(node, module))
	return err == nil
}

// AMQP.

func (am *amqpMesh) busName() string                        { return "amqp" }
func (am *amqpMesh) credential(user string) wire.Credential { return am.br.Creds[user] }

func (am *amqpMesh) fresh(t *testing.T) bus {
	am.br.Reset(ctxFor(t, time.Minute), t)
	return am
}

func (am *amqpMesh) storedEvent(t *testing.T, _, _ string) storedEvent {
	t.Helper()
	d := am.take(t, loggerQueue)
	h := make(map[string][]string, len(d.Headers))
	for name, v := range d.Headers {
		if s, ok := v.(string); ok {
			h[name] = []string{s}
		} else {
			h[name] = []string{fmt.Sprintf("%T(%v)", v, v)} // never equal to a string wanted
		}
	}
	return storedEvent{header: h, body: d.Body, delivery: &d}
}

// settle: RabbitMQ keeps no count of a queue's deliveries, so n is not
// checked; the logger's queue holds nothing ready and the logger nothing
// unacknowledged.
func (am *amqpMesh) settle(t *testing.T, _ int) {
	t.Helper()
	am.settled(t, loggerUser, loggerQueue)
}

func (am *amqpMesh) publishRaw(t *testing.T, user, source, event string, h map[string]string, contentType string, body []byte) {
	t.Helper()
	table := amqp.Table{}
	for name, v := range h {
		table[name] = v
	}
	am.rawPublish(t, user, source+"."+event, table, contentType, body)
}

func (am *amqpMesh) callRaw(t *testing.T, user, module, tool string, args []byte) []byte {
	t.Helper()
	return am.rawCall(t, user, module, tool, args)
}

func (am *amqpMesh) callAimedAtLogger(t *testing.T, user, module, tool string) {
	t.Helper()
	ch, err := am.br.Dial(t, user).Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Publish(wire.ExchangeRPC, wire.ServiceQueue(module, tool), true, false,
		amqp.Publishing{ReplyTo: wire.EventsQueue("node-b", "logger"), CorrelationId: "aimed-1", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

func (am *amqpMesh) loggerHolds(t *testing.T) int {
	t.Helper()
	return am.ready(t, wire.EventsQueue("node-b", "logger"))
}

func (am *amqpMesh) consumerName(node, module string) string {
	return wire.EventsQueue(node, module)
}

func (am *amqpMesh) dropConsumer(t *testing.T, node, module string) {
	t.Helper()
	if _, err := am.channel(t).QueueDelete(wire.EventsQueue(node, module), false, false, false); err != nil {
		t.Fatal(err)
	}
}

func (am *amqpMesh) hasConsumer(t *testing.T, node, module string) bool {
	t.Helper()
	return slices.Contains(am.br.Queues(ctxFor(t, 10*time.Second), t), wire.EventsQueue(node, module))
}
