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
//
// On a bus that keeps no positions (AMQP) the letters are taken from the
// bus once saved, and one handed again (the controller stopped between
// the two) is saved over its own record, known by its consumer and event
// id (store.DeadLetter.Key); one with neither a position nor an event id
// could not be known again, and is logged and passed.
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
	stopFeed, err := bus.FollowDead(ctx, through, func(x plane.Dead) error {
		d := store.DeadLetter{DeadSeq: x.Position, Consumer: x.Consumer, StreamSeq: x.EventPos, Subject: x.Subject, EventID: x.EventID, Deliveries: x.Deliveries, At: x.At}
		d.Node, d.Module, _ = wire.ConsumerOwner(x.Consumer)
		if d.DeadSeq == 0 && d.EventID == "" {
			log.Warn("dead letter with neither a position nor an event id; not recorded, since nothing would know it again", "consumer", d.Consumer, "subject", d.Subject, "deliveries", d.Deliveries)
			return nil
		}
		return saveDead(fctx, st, d, log)
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

// saveDead saves d, trying again while the store does not take it; it
// returns nil once saved, ctx's error if it ended first.
func saveDead(ctx context.Context, st store.Store, d store.DeadLetter, log *slog.Logger) error {
	wait := statusRetry
	for {
		sctx, cancel := context.WithTimeout(ctx, saveTimeout)
		err := st.Update(sctx, func(tx store.Tx) error { return tx.PutDeadLetter(sctx, d) })
		cancel()
		if err == nil {
			log.Warn("dead letter", "consumer", d.Consumer, "event", d.EventID, "subject", d.Subject, "deliveries", d.Deliveries)
			return nil
		}
		log.Warn("dead letter not saved; trying again", "in", wait, "unavailable", errors.Is(err, store.ErrStoreUnavailable), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, deadRetryMax)
	}
}
