package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestHoldingSeesEveryWrite: a message on a subject already held, on a
// new subject, and a replacement under a per-subject limit (same count,
// later sequence) each show as a change.
func TestHoldingSeesEveryWrite(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := dialAs(ctx, t, s, wire.ControllerUser)
	for _, name := range ControlStreams {
		cfg := jetstream.StreamConfig{Name: name, Subjects: wire.StreamSubjects(name), MaxBytes: 1 << 20}
		switch name {
		case wire.StreamControl, wire.StreamBuilds:
			cfg.Retention = jetstream.WorkQueuePolicy
		default:
			cfg.MaxMsgsPerSubject = 1
		}
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, wire.NodeDeclare("node-b"), []byte("one")); err != nil {
		t.Fatal(err)
	}
	before, err := Hold(ctx, js, ControlStreams)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Hold(ctx, js, ControlStreams)
	if d := before.Changes(same); len(d) != 0 {
		t.Fatalf("two readings of nothing written differ: %v", d)
	}
	for _, subject := range []string{wire.NodeDeclare("node-b"), wire.NodeReport("node-a"), wire.SubjectBuildRequest} {
		if _, err := js.Publish(ctx, subject, []byte("two")); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := Hold(ctx, js, ControlStreams)
	got := strings.Join(before.Changes(after), "\n")
	for _, want := range []string{
		"NODES mesh.node.node-b.declare last sequence: was 1, now 2",
		"CONTROL mesh.control.node-a.report messages: appeared (1)",
		"BUILDS messages: was 0, now 1",
		"CONTROL last sequence: was 0, now 1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("expected %q among the changes, got:\n%s", want, got)
		}
	}
}
