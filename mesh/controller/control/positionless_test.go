package control

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// positionless is a bus that keeps no positions, as AMQP does: its
// deliveries are at 0 and it says every entry is below what it holds,
// to go once its window has passed.
type positionless struct{ plane.ControlFeed }

func (positionless) Prunable(context.Context) (uint64, time.Duration, error) {
	return math.MaxUint64, time.Hour, nil
}
func (positionless) CheckEnrolReply(string, string) error               { return nil }
func (positionless) Answer(context.Context, string, []byte) error       { return nil }
func (positionless) RequestBuild(context.Context, string, []byte) error { return nil }

// positionlessMsg is a report delivered at no position.
type positionlessMsg struct {
	plane.ControlMsg
	subject, id string
	data        []byte
}

func (m positionlessMsg) Subject() string  { return m.subject }
func (m positionlessMsg) ID() string       { return m.id }
func (m positionlessMsg) Position() uint64 { return 0 }
func (m positionlessMsg) Attempt() int     { return 1 }
func (m positionlessMsg) Data() []byte     { return m.data }

// TestAnEntryOfABusWithoutPositionsIsPrunedAfterItsWindow: on a bus that
// keeps no positions (AMQP), a message's ledger entry is still a
// message's (position 1, not 0, which is an entry of no message and kept
// for ever), kept within the bus's window and pruned after it; without
// this the ledger of a mesh on AMQP grew with every message ever applied.
func TestAnEntryOfABusWithoutPositionsIsPrunedAfterItsWindow(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	var ahead atomic.Int64
	b.Opts.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	ctx := controllertest.Ctx(t)
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, store.Node{Name: "node-a", SealingKey: "k", Enrolled: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	l := &ControlLoop{m: b.M, st: b.St, o: b.Opts.WithDefaults(), log: slog.New(slog.DiscardHandler), bus: positionless{}}
	r := wire.Report{Kind: wire.KindReport, Node: "node-a", ID: "r-1", At: time.Now(), Applied: 1}
	msg := positionlessMsg{subject: wire.NodeReport("node-a"), id: r.ID, data: r.Marshal()}
	if it := l.apply(ctx, l.st, msg); !it.ack {
		t.Fatalf("expected the report applied, got %+v", it)
	}
	key := store.LedgerKey(msg.subject, msg.id, 0)
	if a, err := b.St.Applied(ctx, key); err != nil || a.Seq != 1 {
		t.Fatalf("expected the entry at position 1, a message's, got %+v (%v)", a, err)
	}
	l.pruneLedger(ctx)
	if _, err := b.St.Applied(ctx, key); err != nil {
		t.Fatalf("expected the entry kept within the window, got %v", err)
	}
	ahead.Store(int64(2 * time.Hour))
	l.pruneLedger(ctx)
	if _, err := b.St.Applied(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expected the entry pruned after the window, got %v", err)
	}
}
