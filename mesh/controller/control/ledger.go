package control

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// The ledger guards CONTROL against applying a message twice: a
// redelivery (the same stream sequence) and a duplicate publish (the same
// message id). Neither can come once the message is gone from the stream
// and the stream's duplicate window has passed since: CONTROL is a work
// queue, so a message is gone once its ack is taken, and a publish of the
// same id after the window is a new message to the server as well. So an
// entry is kept while its message is still in the stream (a controller
// killed between commit and ack finds it on the redelivery, however long
// it was down) and for the window after it was applied; then it is
// pruned (docs/controller-store.md, "The ledger").

// AtSequence is st as the handler of the CONTROL message of ledger key key
// and stream sequence seq sees it: the message's ledger entry is given
// seq, by which PruneLedger knows when it may go. The handlers take the
// key alone; the sequence is the loop's to know.
func AtSequence(st store.Store, key string, seq uint64) store.Store {
	return seqStore{Store: st, key: key, seq: seq}
}

type seqStore struct {
	store.Store
	key string
	seq uint64
}

func (s seqStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(seqTx{Tx: tx, key: s.key, seq: s.seq}) })
}

type seqTx struct {
	store.Tx
	key string
	seq uint64
}

func (t seqTx) PutApplied(ctx context.Context, a store.Applied) error {
	if a.Key == t.key && a.Seq == 0 {
		a.Seq = t.seq
	}
	return t.Tx.PutApplied(ctx, a)
}

// PruneLedger forgets, in one update, the ledger's entries of messages
// below CONTROL sequence below applied before before (store.Tx.PruneLedger).
func PruneLedger(ctx context.Context, st store.Store, below uint64, before time.Time) (int, error) {
	n := 0
	err := st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.PruneLedger(ctx, below, before)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune the ledger: %w", err)
	}
	return n, nil
}

// pruneLedger prunes the ledger as CONTROL stands now.
func (l *ControlLoop) pruneLedger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, handleTimeout)
	defer cancel()
	below, window, err := l.bus.Prunable(ctx)
	if err != nil {
		l.log.Warn("the ledger is not pruned this time", "err", err)
		return
	}
	n, err := PruneLedger(ctx, l.st, below, l.o.Now().Add(-window))
	if err != nil {
		l.log.Warn("the ledger is not pruned this time", "err", err)
		return
	}
	if n > 0 {
		l.log.Debug("ledger pruned", "entries", n, "below", below)
	}
}

// pruning prunes the ledger every o.LedgerPruneEvery until ctx ends.
func (l *ControlLoop) pruning(ctx context.Context) {
	tick := time.NewTicker(l.o.LedgerPruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.pruneLedger(ctx)
		}
	}
}
