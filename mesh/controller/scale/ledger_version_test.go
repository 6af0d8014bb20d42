package scale

import (
	"context"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller"
)

// take applies one report as the loop does.
func take(ctx context.Context, st controller.Store, key string, seq uint64, subject string, data []byte, o controller.Options) error {
	_, err := controller.TakeReport(ctx, st, key, seq, subject, data, o)
	return err
}

// pruneLedger prunes as the loop does: nothing, before issue 18.
func pruneLedger(b *testing.B, ctx context.Context, st controller.Store, seq uint64, now time.Time) {}
