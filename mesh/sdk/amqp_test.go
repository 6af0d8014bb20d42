package sdk_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The SDK's contract over the AMQP binding, against a real RabbitMQ
// carrying the sample mesh's definitions (mesh/amqpdefs): the NATS
// integration tests of this package, case for case, on the bus the mesh
// has today. One broker serves every case; each starts from the mesh as
// declared and empty.
func TestAMQP(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	br := amqptest.Start(t, m, amqptest.WithMaxDeliver(amqpMaxDeliver))
	am := &amqpMesh{br: br, admin: br.Dial(t, wire.ControllerUser)}
	for _, c := range []struct {
		name string
		run  func(*testing.T, *amqpMesh)
	}{
		{"ConnectReadsTheCredential", amqpConnectReadsTheCredential},
		{"ConnectRefusesAnotherCertificate", amqpConnectRefusesAnotherCertificate},
		{"IdentityComesFromTheCredential", amqpIdentityComesFromTheCredential},
		{"EmittedEventHeaderByHeader", amqpEmittedEventHeaderByHeader},
		{"SubscribeMatchesLocallyAndAcksTheRest", amqpSubscribeMatchesLocallyAndAcksTheRest},
		{"DeliveredTwiceHandledOnce", amqpDeliveredTwiceHandledOnce},
		{"EnvelopeRefusalsAndUnknownHeaders", amqpEnvelopeRefusalsAndUnknownHeaders},
		{"FailingHandlerDeadLetters", amqpFailingHandlerDeadLetters},
		{"PublishOutsideEmitsIsDenied", amqpPublishOutsideEmitsIsDenied},
		{"SubscribeWithoutQueue", amqpSubscribeWithoutQueue},
		{"CloseSettlesTheRunningHandler", amqpCloseSettlesTheRunningHandler},
		{"ToolCalls", amqpToolCalls},
		{"ToolQueueGroup", amqpToolQueueGroup},
		{"ToolsOutsideTheGrants", amqpToolsOutsideTheGrants},
		{"NoServiceQueueIsNoResponders", amqpNoServiceQueueIsNoResponders},
		{"OneModuleOnEitherBus", amqpOneModuleOnEitherBus},
	} {
		t.Run(c.name, func(t *testing.T) {
			br.Reset(ctxFor(t, time.Minute), t)
			c.run(t, am)
		})
	}
}

// amqpMaxDeliver is the broker's delivery limit in these tests, small so
// that a dead letter comes quickly.
const amqpMaxDeliver = 3

// Queues of the sample mesh on AMQP.
var (
	loggerQueue  = wire.EventsQueue("node-b", "logger")
	catalogQueue = wire.ServiceQueue("catalog", "catalog_tools")
)

// amqpMesh is the sample mesh on RabbitMQ.
type amqpMesh struct {
	br *amqptest.Broker
	// admin is the controller's connection: it observes the broker.
	admin *amqp.Connection
}

// connect connects user through the SDK, as testMesh.connect does on NATS.
func (am *amqpMesh) connect(tb testing.TB, user string) *sdk.Module {
	tb.Helper()
	for _, name := range []string{wire.EnvNode, wire.EnvModule} {
		tb.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	m, err := sdk.Connect(ctxFor(tb, 10*time.Second), writeCred(tb, am.br.Creds[user]), sdk.WithLogger(testLogger(tb)))
	if err != nil {
		tb.Fatalf("connect as %s: %v", user, err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close %s: %v", user, err)
		}
	})
	return m
}

// channel is a channel of the controller's connection.
func (am *amqpMesh) channel(t *testing.T) *amqp.Channel {
	t.Helper()
	ch, err := am.admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// take removes the next message of queue, as the controller.
func (am *amqpMesh) take(t *testing.T, queue string) amqp.Delivery {
	t.Helper()
	d, ok, err := am.channel(t).Get(queue, true)
	if err != nil || !ok {
		t.Fatalf("get a message from %s: ok %v, %v", queue, ok, err)
	}
	return d
}

// settled waits until queue holds no ready message and user's channels
// no unacknowledged delivery: every delivery was settled, none given
// back. The caller has had its publishes confirmed, so the messages are
// in the queue or delivered before the first look.
func (am *amqpMesh) settled(t *testing.T, user, queue string) {
	t.Helper()
	eventually(t, 15*time.Second, func() (bool, string) {
		ready := am.br.Inspect(t, am.admin, queue).Messages
		unacked := am.br.Unacked(ctxFor(t, 10*time.Second), t, user)
		return ready == 0 && unacked == 0, fmt.Sprintf("%s holds %d ready, %s %d unacknowledged", queue, ready, user, unacked)
	})
}

// ready is the number of messages ready in queue.
func (am *amqpMesh) ready(t *testing.T, queue string) int {
	t.Helper()
	return am.br.Inspect(t, am.admin, queue).Messages
}

// dead waits for n dead letters and returns them.
func (am *amqpMesh) dead(t *testing.T, n int) []amqp.Delivery {
	t.Helper()
	eventually(t, 15*time.Second, func() (bool, string) {
		got := am.ready(t, wire.QueueDead)
		return got >= n, fmt.Sprintf("%d dead letters, want %d", got, n)
	})
	var out []amqp.Delivery
	for range n {
		out = append(out, am.take(t, wire.QueueDead))
	}
	return out
}

// death is the first x-death entry of a dead letter: why and from where.
func death(t *testing.T, d amqp.Delivery) (reason, queue string) {
	t.Helper()
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) == 0 {
		t.Fatalf("expected an x-death header, got %v", d.Headers)
	}
	first, _ := deaths[0].(amqp.Table)
	reason, _ = first["reason"].(string)
	queue, _ = first["queue"].(string)
	return reason, queue
}

// rawPublish publishes on mesh.events as user, bypassing the SDK, and
// waits for the confirm.
func (am *amqpMesh) rawPublish(t *testing.T, user, routingKey string, headers amqp.Table, contentType string, body []byte) {
	t.Helper()
	ch, err := am.br.Dial(t, user).Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm(wire.ExchangeEvents, routingKey, false, false,
		amqp.Publishing{Headers: headers, ContentType: contentType, DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctxFor(t, 5*time.Second)); !ok || err != nil {
		t.Fatalf("publish %s as %s: confirmed %v, %v", routingKey, user, ok, err)
	}
}

// rawCall calls a tool as user through direct reply-to, bypassing the SDK.
func (am *amqpMesh) rawCall(t *testing.T, user, module, tool string, args []byte) []byte {
	t.Helper()
	ch, err := am.br.Dial(t, user).Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	replies, err := ch.Consume(wire.DirectReplyTo, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish(wire.ExchangeRPC, wire.ServiceQueue(module, tool), true, false,
		amqp.Publishing{ReplyTo: wire.DirectReplyTo, CorrelationId: "raw-1", Body: args}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-replies:
		return d.Body
	case <-ctxFor(t, 5*time.Second).Done():
		t.Fatalf("no answer to %s's call of %s.%s", user, module, tool)
		return nil
	}
}

func amqpConnectReadsTheCredential(t *testing.T, am *amqpMesh) {
	m := am.connect(t, sensorUser)
	if m.Node() != "node-a" || m.Name() != "sensor" {
		t.Fatalf("expected sensor on node-a, got %s on %s", m.Name(), m.Node())
	}
	if _, err := m.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{}`)); err != nil {
		t.Fatalf("expected a connected module to publish, got %v", err)
	}
}

func amqpConnectRefusesAnotherCertificate(t *testing.T, am *amqpMesh) {
	cred := am.br.Creds[sensorUser]
	cred.Fingerprint = strings.Repeat("ab", 32)
	if _, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, cred)); !errors.Is(err, sdk.ErrFingerprint) {
		t.Fatalf("expected ErrFingerprint, got %v", err)
	}
	// Plain amqp:// has no certificate to pin: a scoped credential over it
	// is refused, naming the field, before anything is dialled.
	plain := am.br.Creds[sensorUser]
	plain.URL = "amqp" + plain.URL[len("amqps"):]
	if _, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, plain)); !errors.Is(err, wire.ErrBadCredential) {
		t.Fatalf("expected a scoped credential over amqp:// refused, got %v", err)
	}
}

func amqpIdentityComesFromTheCredential(t *testing.T, am *amqpMesh) {
	t.Setenv(wire.EnvNode, "node-z")
	t.Setenv(wire.EnvModule, "impostor")
	m, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, am.br.Creds[sensorUser]))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if os.Getenv(wire.EnvNode) != "node-a" || os.Getenv(wire.EnvModule) != "sensor" {
		t.Fatalf("expected the environment overwritten with node-a and sensor, got %q and %q", os.Getenv(wire.EnvNode), os.Getenv(wire.EnvModule))
	}
	if _, err := m.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"celsius":20}`)); err != nil {
		t.Fatal(err)
	}
	h := am.take(t, loggerQueue).Headers
	if h[wire.HeaderSource] != "sensor" || h[wire.HeaderNode] != "node-a" {
		t.Fatalf("expected x-source sensor and x-node node-a, got %v and %v", h[wire.HeaderSource], h[wire.HeaderNode])
	}
}
