package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

func TestStreamsDiffSeesEveryChange(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := dialAs(ctx, t, s, wire.ControllerUser)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamNodes, Subjects: []string{wire.SubjectNodesAll}, MaxMsgsPerSubject: 1, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	before, err := Streams(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Streams(ctx, js)
	if d := Diff(before, same); len(d) != 0 {
		t.Fatalf("expected no difference between two readings, got %v", d)
	}

	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: wire.StreamNodes, Subjects: []string{wire.SubjectNodesAll}, MaxMsgsPerSubject: 2, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, wire.StreamNodes, jetstream.ConsumerConfig{Durable: "extra", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	after, _ := Streams(ctx, js)
	d := strings.Join(Diff(before, after), "\n")
	for _, want := range []string{"stream NODES configuration changed", "consumer NODES/extra appeared"} {
		if !strings.Contains(d, want) {
			t.Errorf("expected %q in the diff, got:\n%s", want, d)
		}
	}
}
