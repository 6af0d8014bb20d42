package host

import (
	"context"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestTheOutboxKeepsReportsUntilControlHoldsThem: reports made while the
// bus is away wait on disk, survive the host started again, and are sent
// in order, each once, when the bus is there.
func TestTheOutboxKeepsReportsUntilControlHoldsThem(t *testing.T) {
	st := State{Dir: t.TempDir()}
	if err := st.open(); err != nil {
		t.Fatal(err)
	}
	out, err := openOutbox(st)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, id := range []string{"r1", "r2", "r3"} {
		if err := out.add(wire.Report{Kind: wire.KindReport, Node: "node-a", ID: id, At: now, Applied: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	bus := &fakeBus{away: true}
	// Sending fails while CONTROL cannot take them: nothing is lost.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := out.send(ctx, bus); err == nil {
		t.Fatal("reports sent with no CONTROL to hold them")
	}
	if out.Len() != 3 {
		t.Fatalf("expected three reports waiting, got %d", out.Len())
	}
	// The host started again finds them.
	again, err := openOutbox(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.add(wire.Report{Kind: wire.KindReport, Node: "node-a", ID: "r4", At: now, Applied: 4}); err != nil {
		t.Fatal(err)
	}
	bus.setAway(false)
	if err := again.send(ctx, bus); err != nil {
		t.Fatal(err)
	}
	if again.Len() != 0 {
		t.Fatalf("expected none waiting, got %d", again.Len())
	}
	var got []uint64
	for _, r := range bus.held() {
		got = append(got, r.Applied)
	}
	if len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Fatalf("expected reports 1..4 in order, got %v", got)
	}
}
