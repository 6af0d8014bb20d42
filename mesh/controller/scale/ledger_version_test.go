package scale

import (
	"context"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/control"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
)

// take applies one report as the loop does: its ledger entry at its
// CONTROL sequence.
func take(ctx context.Context, st store.Store, key string, seq uint64, subject string, data []byte, o rollout.Options) error {
	_, err := control.TakeReport(ctx, control.AtSequence(st, key, seq), key, seq, subject, data, "", o)
	return err
}

// pruneLedger prunes as the loop does, every controller.LedgerPruneEvery
// of the benchmark's clock (a report every 10 ms: every 1 000 reports),
// with every report taken so far gone from CONTROL (acknowledged) and
// CONTROL's duplicate window of two minutes.
func pruneLedger(b *testing.B, ctx context.Context, st store.Store, seq uint64, now time.Time) {
	if seq%1000 != 0 {
		return
	}
	if _, err := control.PruneLedger(ctx, st, seq+1, now.Add(-2*time.Minute)); err != nil {
		b.Fatal(err)
	}
}
