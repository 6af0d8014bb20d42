package status

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestADeadLetterIsFoldedWithItsEvent: an event the logger's handler
// keeps failing runs out of deliveries; DEAD records it, and the
// controller folds it into the store naming the module, the consumer and
// the event, once, across a restart.
func TestADeadLetterIsFoldedWithItsEvent(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := natsplane.DefaultPolicy()
	p.EventsAckWait = 200 * time.Millisecond
	conns, err := b.StartBus(ctx, natsplane.ControllerOptions{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	stop, err := FollowDead(ctx, conns, b.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}

	sensor, err := b.Dial(wire.ModuleUser("node-a", "sensor"))
	if err != nil {
		t.Fatal(err)
	}
	defer sensor.Close()
	sjs, _ := jetstream.New(sensor)
	msg := nats.NewMsg(wire.EventSubject("sensor", "reading"))
	msg.Header.Set(wire.HeaderEventID, "evt-dead-1")
	msg.Data = []byte(`{}`)
	ack, err := sjs.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	logger, err := b.Dial(wire.ModuleUser("node-b", "logger"))
	if err != nil {
		t.Fatal(err)
	}
	defer logger.Close()
	ljs, _ := jetstream.New(logger)
	cons, err := ljs.Consumer(ctx, wire.StreamEvents, wire.ModuleConsumer("node-b", "logger"))
	if err != nil {
		t.Fatal(err)
	}
	// The handler fails every delivery.
	for delivered := 0; delivered < p.EventsMaxDeliver; {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			delivered++
			_ = m.Nak()
		}
	}
	// The server gives up on the event when it would deliver it once
	// more: to a module still pulling, as a running one is.
	if batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
		for m := range batch.Messages() {
			t.Fatalf("delivered again after max-deliver: %s", m.Subject())
		}
	}
	var dead []store.DeadLetter
	controllertest.Eventually(t, 20*time.Second, "the dead letter folded", func() bool {
		dead, err = b.St.DeadLetters(controllertest.Ctx(t))
		return err == nil && len(dead) == 1
	})
	d := dead[0]
	if d.Module != "logger" || d.Node != "node-b" || d.Consumer != wire.ModuleConsumer("node-b", "logger") || d.StreamSeq != ack.Sequence || d.EventID != "evt-dead-1" || d.Deliveries != p.EventsMaxDeliver {
		t.Fatalf("dead letter: %+v", d)
	}
	// Started again, it folds nothing twice.
	stop()
	stop, err = FollowDead(ctx, conns, b.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if again, _ := b.St.DeadLetters(controllertest.Ctx(t)); len(again) != 1 {
		t.Fatalf("after a restart: %+v", again)
	}
}
