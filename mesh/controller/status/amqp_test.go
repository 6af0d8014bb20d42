package status

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestOnAMQPTheStatusAndTheDeadLettersAreFolded: on RabbitMQ, with the
// same FollowStatus and FollowDead as on NATS, a provider's failing word
// is in the status, and its recovered word takes it out; an event the
// logger gives back until its queue's limit is a dead letter in the store
// naming the module, the consumer, the subject, the event and the
// deliveries; started again, the followers fold nothing twice.
func TestOnAMQPTheStatusAndTheDeadLettersAreFolded(t *testing.T) {
	const maxDeliver = 2
	m := controllertest.SampleMesh(t)
	for i := range m.Modules {
		if m.Modules[i].Name == "sensor" {
			m.Modules[i].Provides = []string{"store"}
		}
	}
	m = controllertest.Revalidate(t, m)
	b := controllertest.NewBed(t, m)
	br := amqptest.Start(t, m, amqptest.WithMaxDeliver(maxDeliver))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{MaxDeliver: maxDeliver})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Assert(ctx, m); err != nil {
		t.Fatal(err)
	}
	log := controllertest.Logger(t)
	stopStatus, err := FollowStatus(ctx, c, b.St, log)
	if err != nil {
		t.Fatal(err)
	}
	stopDead, err := FollowDead(ctx, c, b.St, log)
	if err != nil {
		t.Fatal(err)
	}

	sensor, err := br.Dial(t, wire.AMQPUser("node-a", "sensor")).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := sensor.Confirm(false); err != nil {
		t.Fatal(err)
	}
	emit := func(key, id string, body []byte) {
		t.Helper()
		h := map[string][]string{
			wire.HeaderEventID: {id}, wire.HeaderSource: {"sensor"}, wire.HeaderNode: {"node-a"},
			wire.HeaderTime: {wire.FormatTime(time.Now())}, wire.HeaderContentType: {wire.ContentTypeJSON},
		}
		dc, err := sensor.PublishWithDeferredConfirm(wire.ExchangeEvents, wire.EventRoutingKey("sensor", key), false, false,
			amqp.Publishing{Headers: amqp.Table(wire.HeadersToTable(h)), ContentType: wire.ContentTypeJSON, DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("emit %s: not confirmed (%v)", key, err)
		}
	}
	ref := wire.ConsumerRef{Consumer: "logger", Node: "node-b"}
	failing, _ := json.Marshal(wire.FailingEvent{ConsumerRef: ref, Class: wire.ClassUnreachable, Since: time.Now().UTC()})
	recovered, _ := json.Marshal(wire.RecoveredEvent{ConsumerRef: ref, Reason: wire.RecoveredSuccess})

	emit(wire.EventProvisionerFailing, "fail-1", failing)
	var st store.Status
	controllertest.Eventually(t, 20*time.Second, "the failing word in the status", func() bool {
		st, err = b.St.Status(ctx)
		return err == nil && len(st.Failing) == 1
	})
	if f := st.Failing[0]; f.Provider != "sensor" || f.Consumer != "logger" || f.Node != "node-b" || f.EventID != "fail-1" || st.LastEventID != "fail-1" || st.Through != 0 {
		t.Fatalf("expected sensor failing logger on node-b by fail-1, at no position, got %+v", st)
	}

	// The logger's handler fails the reading until its queue gives up.
	emit("reading", "dead-1", []byte(`{}`))
	logger, err := br.Dial(t, wire.AMQPUser("node-b", "logger")).Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := logger.Consume(wire.EventsQueue("node-b", "logger"), "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range maxDeliver {
		select {
		case d := <-ds:
			_ = d.Nack(false, true)
		case <-ctx.Done():
			t.Fatal("the reading was not delivered to the logger")
		}
	}
	var dead []store.DeadLetter
	controllertest.Eventually(t, 20*time.Second, "the dead letter folded", func() bool {
		dead, err = b.St.DeadLetters(ctx)
		return err == nil && len(dead) == 1
	})
	if d := dead[0]; d.DeadSeq != 0 || d.Consumer != wire.ModuleConsumer("node-b", "logger") || d.Node != "node-b" || d.Module != "logger" ||
		d.Subject != wire.EventSubject("sensor", "reading") || d.EventID != "dead-1" || d.Deliveries != maxDeliver || d.At.IsZero() {
		t.Fatalf("dead letter: %+v", d)
	}

	emit(wire.EventProvisionerRecovered, "recovered-1", recovered)
	controllertest.Eventually(t, 20*time.Second, "the recovered word folded", func() bool {
		st, err = b.St.Status(ctx)
		return err == nil && len(st.Failing) == 0 && st.LastEventID == "recovered-1"
	})

	// Started again, they fold nothing twice: the next word is the next
	// change.
	stopStatus()
	stopDead()
	stopStatus, err = FollowStatus(ctx, c, b.St, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stopStatus()
	stopDead, err = FollowDead(ctx, c, b.St, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stopDead()
	emit(wire.EventProvisionerFailing, "fail-2", failing)
	controllertest.Eventually(t, 20*time.Second, "the second failing word folded", func() bool {
		st, err = b.St.Status(ctx)
		return err == nil && st.LastEventID == "fail-2"
	})
	if len(st.Failing) != 1 || st.Failing[0].EventID != "fail-2" {
		t.Fatalf("expected fail-2 alone failing, got %+v", st)
	}
	if again, _ := b.St.DeadLetters(ctx); len(again) != 1 {
		t.Fatalf("after a restart: %+v", again)
	}
}
