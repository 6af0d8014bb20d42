package sdk_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// Queues of the sample mesh on AMQP.
var (
	loggerQueue  = wire.EventsQueue("node-b", "logger")
	catalogQueue = wire.ServiceQueue("mesh-catalog", "catalog_tools")
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
	return connectAs(tb, user, writeCred(tb, am.br.Creds[user]))
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

// quorumDeliveryCount is the header a quorum queue adds to what it
// delivers: not the emitter's, and accepted as any unknown x- header is.
const quorumDeliveryCount = "x-delivery-count"

// A call routed nowhere — the tool's queue is gone — comes back from the
// broker unroutable (312): ErrNoResponders, not a timeout.
func amqpNoServiceQueueIsNoResponders(t *testing.T, am *amqpMesh) {
	if _, err := am.channel(t).QueueDelete(catalogQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	logger := am.connect(t, loggerUser)
	_, err := logger.Request(ctxFor(t, 5*time.Second), "mesh-catalog", "catalog_tools", []byte(`{}`))
	if !errors.Is(err, sdk.ErrNoResponders) || !strings.Contains(err.Error(), fmt.Sprint(wire.NoRespondersAMQP)) {
		t.Fatalf("expected ErrNoResponders from a return with %d, got %v", wire.NoRespondersAMQP, err)
	}
}
