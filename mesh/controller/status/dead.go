package status

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// deadRetry bounds the wait before a dead letter the store did not take
// is saved again.
const deadRetryMax = 15 * time.Second

// FollowDead folds DEAD into the store: each max-deliveries advisory, with
// the event it names, after the last one the store holds. It reads DEAD
// with an ordered consumer (the controller acks nothing there), from the
// sequence after the newest folded, so a controller started again folds
// each one once; a dead letter the store cannot take is saved again until
// it can, and nothing after it is read before. stop ends it.
func FollowDead(ctx context.Context, bus plane.DeadFeed, st store.Store, log *slog.Logger) (stop func(), err error) {
	held, err := st.DeadLetters(ctx)
	if err != nil {
		return nil, err
	}
	var through uint64
	for _, d := range held {
		through = max(through, d.DeadSeq)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopFeed, err := bus.FollowDead(ctx, through, func(x plane.Dead) {
		d := store.DeadLetter{DeadSeq: x.Position, Consumer: x.Consumer, StreamSeq: x.EventPos, Subject: x.Subject, EventID: x.EventID, Deliveries: x.Deliveries, At: x.At}
		d.Node, d.Module, _ = wire.ConsumerOwner(x.Consumer)
		saveDead(fctx, st, d, log)
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return func() {
		cancel()
		stopFeed()
	}, nil
}

// saveDead saves d, trying again while the store does not take it.
func saveDead(ctx context.Context, st store.Store, d store.DeadLetter, log *slog.Logger) {
	wait := statusRetry
	for {
		sctx, cancel := context.WithTimeout(ctx, saveTimeout)
		err := st.Update(sctx, func(tx store.Tx) error { return tx.PutDeadLetter(sctx, d) })
		cancel()
		if err == nil {
			log.Warn("dead letter", "consumer", d.Consumer, "event", d.EventID, "subject", d.Subject, "deliveries", d.Deliveries)
			return
		}
		log.Warn("dead letter not saved; trying again", "in", wait, "unavailable", errors.Is(err, store.ErrStoreUnavailable), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, deadRetryMax)
	}
}
