package observe

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestSurviveSeesEveryLoss: all held is OK; a message deleted is missing
// and leaves a gap in nothing acknowledged; an event stored a second time
// (past the dedup window: another Nats-Msg-Id) is a duplicate.
func TestSurviveSeesEveryLoss(t *testing.T) {
	s := startMesh(t, "mesh.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, ajs := dialAs(ctx, t, s, wire.ControllerMeshUser)
	if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamEvents, Subjects: []string{wire.SubjectModuleEvents}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	_, sjs := dialAs(ctx, t, s, wire.ModuleUser("node-a", "sensor"))
	acked, err := Emit(ctx, sjs, "node-a", "sensor", "reading", 20)
	if err != nil || len(acked) != 20 {
		t.Fatalf("emit: %d acknowledged, %v", len(acked), err)
	}
	got, err := Survive(ctx, ajs, wire.StreamEvents, acked)
	if err != nil || !got.OK() || got.Present != 20 {
		t.Fatalf("all held: %v, %v", got, err)
	}

	st, _ := ajs.Stream(ctx, wire.StreamEvents)
	if err := st.DeleteMsg(ctx, acked[5].Seq); err != nil {
		t.Fatal(err)
	}
	again := nats.NewMsg(wire.EventSubject("sensor", "reading"))
	again.Header.Set(wire.HeaderEventID, acked[7].ID)
	if _, err := sjs.PublishMsg(ctx, again); err != nil { // no Nats-Msg-Id: not deduplicated
		t.Fatal(err)
	}
	got, err = Survive(ctx, ajs, wire.StreamEvents, acked)
	if err != nil {
		t.Fatal(err)
	}
	if got.OK() || got.Present != 19 || len(got.Missing) != 1 || got.Missing[0] != acked[5].Seq ||
		len(got.Duplicated) != 1 || got.Duplicated[0] != acked[7].ID || len(got.Gaps) != 0 {
		t.Fatalf("expected one missing (%d) and one duplicated (%s), got %v", acked[5].Seq, acked[7].ID, got)
	}
	// Acknowledgements that skip a sequence: a gap.
	skipping := append([]Acked{}, acked[:3]...)
	skipping = append(skipping, acked[4:6]...)
	got, _ = Survive(ctx, ajs, wire.StreamEvents, skipping)
	if len(got.Gaps) != 1 || got.Gaps[0] != acked[3].Seq {
		t.Fatalf("expected a gap at %d, got %v", acked[3].Seq, got)
	}
}
