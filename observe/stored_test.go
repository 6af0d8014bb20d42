package observe

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

func TestStoredAndPendingAsTheServerCounts(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := dialAs(ctx, t, s, wire.ControllerMeshUser)
	if got, err := StoredOn(ctx, js, wire.EventSubject("sensor", "reading")); err != nil || got.Stream != "" {
		t.Fatalf("no stream yet: %+v, %v", got, err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamEvents, Subjects: []string{wire.SubjectModuleEvents}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	consumer := wire.ModuleConsumer("node-b", "logger")
	if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 4}); err != nil {
		t.Fatal(err)
	}
	// The logger fetches and acks: its consumer's acks are its alone.
	_, ljs := dialAs(ctx, t, s, wire.ModuleUser("node-b", "logger"))
	cons, err := ljs.Consumer(ctx, wire.StreamEvents, consumer)
	if err != nil {
		t.Fatal(err)
	}
	_, sjs := dialAs(ctx, t, s, wire.ModuleUser("node-a", "sensor"))
	for range 3 {
		if _, err := sjs.Publish(ctx, wire.EventSubject("sensor", "reading"), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := StoredOn(ctx, js, wire.EventSubject("sensor", "reading")); err != nil || got != (Stored{Stream: wire.StreamEvents, Count: 3}) {
		t.Fatalf("three stored: %+v, %v", got, err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var first jetstream.Msg
	for m := range batch.Messages() {
		first = m
	}
	if got, err := PendingOn(ctx, js, wire.StreamEvents, consumer); err != nil || got != (Pending{AckPending: 1, Pending: 2}) {
		t.Fatalf("one delivered unacked, two to come: %+v, %v", got, err)
	}
	if got, err := ProgressOn(ctx, js, wire.StreamEvents, consumer); err != nil || got.Acknowledged(1) || got.MaxDeliver != 4 || got.AckFloor != 0 {
		t.Fatalf("nothing acknowledged yet, max deliver 4: %+v, %v", got, err)
	}
	if err := first.Nak(); err != nil {
		t.Fatal(err)
	}
	// The nak reaches the consumer on its own time: the others may be
	// delivered before the first comes again.
	for redelivered := false; !redelivered; {
		again, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range again.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil && meta.Sequence.Stream == 1 {
				first, redelivered = m, true
			}
		}
		if n == 0 {
			t.Fatal("the nak'd delivery did not come again")
		}
	}
	if got, err := ProgressOn(ctx, js, wire.StreamEvents, consumer); err != nil || got.Redelivered != 1 || got.Acknowledged(1) || got.Delivered < 2 {
		t.Fatalf("the first redelivered, unacknowledged: %+v, %v", got, err)
	}
	if err := first.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := ProgressOn(ctx, js, wire.StreamEvents, consumer); err != nil || got.AckFloor != 1 || got.Acknowledged(2) {
		t.Fatalf("the first acknowledged, the second not: %+v, %v", got, err)
	}
}

func TestHeldReportsAreANodesOwnInOrder(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := dialAs(ctx, t, s, wire.ControllerUser)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamControl, Subjects: []string{wire.SubjectReports}, Retention: jetstream.WorkQueuePolicy, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []wire.Report{
		{Node: "node-a", ID: "a1", At: time.Now(), Applied: 1},
		{Node: "node-b", ID: "b1", At: time.Now(), Applied: 1},
		{Node: "node-a", ID: "a2", At: time.Now(), Applied: 2},
	} {
		_, hjs := dialAs(ctx, t, s, wire.HostUser(r.Node))
		if _, err := hjs.Publish(ctx, wire.NodeReport(r.Node), r.Marshal()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := HeldReports(ctx, js, "node-a")
	if err != nil || len(got) != 2 || got[0].ID != "a1" || got[1].ID != "a2" {
		t.Fatalf("node-a's reports: %+v (%v)", got, err)
	}
}
