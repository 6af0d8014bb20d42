package amqpplane_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// notRouted: a module that
// serves a tool may write the default exchange, and so put anything into
// the status queue or the dead letters' queue by name, x-death and all
// (the broker takes it: confirmed); and a module's terminated event lands
// in the dead letters' queue too, as "rejected". None of them is handed
// to the controller: the first status word and the first dead letter it
// is handed are the genuine ones sent after them, and the queues are left
// empty.
//
// It runs on TestContract's broker, as one of its subtests.
func notRouted(t *testing.T, b *amqpBus) {
	br, c := b.br, b.ctl
	ctx := ctxT(t, 2*time.Minute)

	// The sensor serves calibrate: it writes the default exchange.
	forger, err := br.Dial(t, wire.AMQPUser("node-a", "sensor")).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := forger.Confirm(false); err != nil {
		t.Fatal(err)
	}
	forge := func(queue, id string, headers amqp.Table) {
		t.Helper()
		headers[wire.HeaderEventID] = id
		dc, err := forger.PublishWithDeferredConfirm(wire.ExchangeByQueueName, queue, false, false, amqp.Publishing{Headers: headers, ContentType: wire.ContentTypeJSON, Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("expected the broker to take what is put into %s by name (the route this test closes), got %v %v", queue, ok, err)
		}
	}
	forge(wire.QueueStatus, "forged-status", amqp.Table{})
	forge(wire.QueueDead, "forged-dead", amqp.Table{wire.AMQPDeath: []any{amqp.Table{
		wire.DeathQueue: wire.EventsQueue("node-b", "logger"), wire.DeathReason: wire.DeathDeliveryLimit,
		wire.DeathCount: int64(1), wire.DeathExchange: wire.ExchangeEvents, wire.DeathRoutingKeys: []any{"sensor.reading"},
	}}})

	// The logger terminates a reading: rejected, not given up on.
	b.emit("node-a", "sensor", "reading", "terminated", []byte(`{}`))
	logger, err := br.Dial(t, wire.AMQPUser("node-b", "logger")).Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := logger.Consume(wire.EventsQueue("node-b", "logger"), "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the reading was not delivered to the logger")
	}
	_ = logger.Close()

	b.Provide(wire.EventProvisionerFailing, "genuine-status", []byte(`{}`))
	b.Poison("genuine-dead")

	events := make(chan plane.EventMsg, 4)
	stopEvents, err := c.FollowEvents(ctx, func(m plane.EventMsg) { events <- m })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEvents)
	select {
	case m := <-events:
		if id := wire.HeaderValue(m.Header(), wire.HeaderEventID); id != "genuine-status" || m.Subject() != wire.EventSubject(provider, wire.EventProvisionerFailing) {
			t.Fatalf("expected the provider's genuine-status first, got %s on %s", id, m.Subject())
		}
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no status event handed over")
	}
	letters := make(chan plane.Dead, 4)
	stopDead, err := c.FollowDead(ctx, 0, func(d plane.Dead) error { letters <- d; return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopDead)
	select {
	case d := <-letters:
		if d.EventID != "genuine-dead" || d.Consumer != wire.ModuleConsumer("node-b", "logger") || d.Subject != wire.EventSubject("sensor", "reading") || d.Deliveries != eventsMaxDeliver {
			t.Fatalf("expected the logger's genuine-dead given up on after %d deliveries first, got %+v", eventsMaxDeliver, d)
		}
	case <-ctx.Done():
		t.Fatal("no dead letter handed over")
	}
	admin := br.Dial(t, wire.ControllerMeshUser)
	for _, q := range []string{wire.QueueStatus, wire.QueueDead} {
		deadline := time.Now().Add(10 * time.Second)
		for n := br.Inspect(t, admin, q).Messages; n != 0; n = br.Inspect(t, admin, q).Messages {
			if time.Now().After(deadline) {
				t.Fatalf("expected %s left empty, it holds %d", q, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
