package observe

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestDeadLetterFindsTheOneGivenUp: a reading nak'd at each of its two
// deliveries is in DEAD for its consumer and sequence; one acknowledged
// at once is not, nor is the first under another consumer's name.
func TestDeadLetterFindsTheOneGivenUp(t *testing.T) {
	s := startMesh(t, "conformance.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consumer := wire.ModuleConsumer("node-b", "consumer")
	_, js := dialAs(ctx, t, s, wire.ControllerMeshUser)
	eventsAndDead(ctx, t, js, consumer, 2)
	_, ejs := dialAs(ctx, t, s, wire.ModuleUser("node-a", "emitter"))
	_, mjs := dialAs(ctx, t, s, wire.ModuleUser("node-b", "consumer"))
	cons, err := mjs.Consumer(ctx, wire.StreamEvents, consumer)
	if err != nil {
		t.Fatal(err)
	}

	given := reading(ctx, t, ejs, true)
	for range 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			if err := msg.Nak(); err != nil {
				t.Fatal(err)
			}
		}
	}
	kept := reading(ctx, t, ejs, true)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The server gives a message up, and says so, when a pull finds it
	// next with its deliveries spent; a nak is not confirmed, so the pull
	// for the kept reading may have come before the second nak was
	// taken. Pull on (taking nothing the consumer has not seen) until the
	// dead letter is there.
	var dead *MaxDeliveries
	for dead == nil {
		if dead, err = DeadLetter(ctx, js, consumer, given); err != nil {
			t.Fatal(err)
		}
		if dead != nil {
			break
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			if meta, err := msg.Metadata(); err == nil && meta.Sequence.Stream == given {
				t.Fatalf("expected sequence %d given up after 2 deliveries, it was delivered again (%d)", given, meta.NumDelivered)
			}
			if err := msg.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no dead letter of stream sequence %d", given)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if dead.Deliveries != 2 {
		t.Fatalf("expected a dead letter after 2 deliveries, got %+v", dead)
	}
	for _, c := range []struct {
		consumer string
		seq      uint64
	}{{consumer, kept}, {"node-a_consumer", given}} {
		if d, err := DeadLetter(ctx, js, c.consumer, c.seq); err != nil || d != nil {
			t.Errorf("%s sequence %d: expected no dead letter, got %+v, %v", c.consumer, c.seq, d, err)
		}
	}
}

// TestFailDeliveriesRunsTheDeliveriesOut: a handler failing every
// delivery sees the event as often as max-deliver allows, and then DEAD
// holds its dead letter.
func TestFailDeliveriesRunsTheDeliveriesOut(t *testing.T) {
	s := startMesh(t, "conformance.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consumer := wire.ModuleConsumer("node-b", "consumer")
	_, js := dialAs(ctx, t, s, wire.ControllerMeshUser)
	eventsAndDead(ctx, t, js, consumer, 3)
	_, ejs := dialAs(ctx, t, s, wire.ModuleUser("node-a", "emitter"))
	_, mjs := dialAs(ctx, t, s, wire.ModuleUser("node-b", "consumer"))
	given := reading(ctx, t, ejs, true)
	n, err := FailDeliveries(ctx, mjs, wire.StreamEvents, consumer, given, time.Second)
	if err != nil || n != 3 {
		t.Fatalf("expected three deliveries, got %d (%v)", n, err)
	}
	for {
		if d, err := DeadLetter(ctx, js, consumer, given); err != nil || d != nil {
			if err != nil || d.Deliveries != 3 {
				t.Fatalf("dead letter %+v (%v)", d, err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no dead letter")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
