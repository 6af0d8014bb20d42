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
	cons, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy})
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
	for range batch.Messages() {
	}
	if got, err := PendingOn(ctx, js, wire.StreamEvents, consumer); err != nil || got != (Pending{AckPending: 1, Pending: 2}) {
		t.Fatalf("one delivered unacked, two to come: %+v, %v", got, err)
	}
}
