package observe

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestDeadLetterFindsTheOneGivenUp: a reading nak'd at each of its two
// deliveries is in DEAD for its consumer and sequence; one acknowledged
// at once is not, nor is the first under another consumer's name.
func TestDeadLetterFindsTheOneGivenUp(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "conformance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consumer := wire.ModuleConsumer("node-b", "consumer")
	ctl, err := Dial(ctx, s.Creds[wire.ControllerMeshUser], "")
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	js, _ := jetstream.New(ctl.Conn)
	eventsAndDead(ctx, t, js, consumer, 2)
	emitter, err := Dial(ctx, s.Creds[wire.ModuleUser("node-a", "emitter")], "")
	if err != nil {
		t.Fatal(err)
	}
	defer emitter.Close()
	ejs, _ := jetstream.New(emitter.Conn)
	mod, err := Dial(ctx, s.Creds[wire.ModuleUser("node-b", "consumer")], "")
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	mjs, _ := jetstream.New(mod.Conn)
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

	var dead *MaxDeliveries
	for dead == nil {
		if dead, err = DeadLetter(ctx, js, consumer, given); err != nil {
			t.Fatal(err)
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
