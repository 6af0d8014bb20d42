package control

import (
	"context"
	"errors"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// batchMax is how many CONTROL messages the loop holds at once, and so
// applies in one commit at most. One at a time, each message cost a
// commit of its own (an fsync, a PostgreSQL transaction), and a leaked
// token's junk published faster than that queued everything behind it
// (issue 18: 4 000 claims in 6 s not handled after two minutes). Held
// messages are delivered and not acknowledged: a controller killed holds
// up to batchMax of them until CONTROL's ack wait, so the batch is kept
// small.
const batchMax = 32

// follow hands the deliveries to the handlers until stopping: those
// waiting are taken together (applyBatch) as far as they may be.
func (l *ControlLoop) follow(in <-chan plane.ControlMsg, stopping <-chan struct{}) {
	for {
		var first plane.ControlMsg
		select {
		case <-stopping:
			return
		case first = <-in:
		}
		msgs := []plane.ControlMsg{first}
	more:
		for len(msgs) < batchMax {
			select {
			case msg := <-in:
				msgs = append(msgs, msg)
			default:
				break more
			}
		}
		for len(msgs) > 0 {
			n := 0
			for n < len(msgs) && batchable(msgs[n].Subject()) {
				n++
			}
			switch n {
			case 0:
				l.handle(msgs[0])
				n = 1
			case 1:
				l.handle(msgs[0])
			default:
				l.applyBatch(msgs[:n])
			}
			msgs = msgs[n:]
		}
	}
}

// batchable says whether a message on subject may be applied in a batch:
// its handler's whole effect is its update and what settle does after
// (an answer, counts, a composition asked for). A push writes nats.conf
// and publishes declarations, and an announcement publishes to BUILDS,
// once their update is committed: each is handled on its own.
func batchable(subject string) bool {
	return subject == wire.SubjectEnrol || subject == wire.SubjectBuilt || isReport(subject)
}

// errNoParts is a store whose transactions cannot undo a part of
// themselves (store.SubTx): its batch is handled one message at a time.
var errNoParts = errors.New("the store's transactions have no parts")

// applyBatch applies msgs in one update of the store, each message's
// handler in a part of it (store.SubTx.Sub), so that one that fails keeps
// nothing and the others keep their effects; then settles them all. A
// commit that fails holds them all, as one message's would be held.
func (l *ControlLoop) applyBatch(msgs []plane.ControlMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), handleTimeout)
	defer cancel()
	items := make([]*item, 0, len(msgs))
	err := l.st.Update(ctx, func(tx store.Tx) error {
		sub, ok := tx.(store.SubTx)
		if !ok {
			return errNoParts
		}
		items = items[:0]
		for _, msg := range msgs {
			it := l.apply(ctx, batchStore{sub}, msg)
			if errors.Is(it.hold, store.ErrStoreUnavailable) || ctx.Err() != nil {
				// The transaction is as good as gone: nothing of the
				// batch is committed.
				if it.hold == nil {
					return ctx.Err()
				}
				return it.hold
			}
			items = append(items, it)
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoParts):
		for _, msg := range msgs {
			l.handle(msg)
		}
		return
	case err != nil:
		// Each held as it would be alone, by its own deliveries.
		l.hold(msgs[0], l.log.With("subject", msgs[0].Subject(), "batch", len(msgs)), err)
		for _, msg := range msgs[1:] {
			delay := controlRetry
			if errors.Is(err, store.ErrStoreUnavailable) {
				delay = awayDelay(msg)
			}
			l.count(func(c *ControlCounts) { c.Held++ })
			_ = msg.Hold(delay)
		}
		return
	}
	l.settle(items)
}

// batchStore is the store as a handler in a batch sees it: its update is
// a part of the batch's one transaction, and it reads what the batch
// wrote so far.
type batchStore struct{ store.SubTx }

func (b batchStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return b.Sub(ctx, func() error { return fn(b.SubTx) })
}

// Create is no part of a batch.
func (b batchStore) Create(context.Context, store.State) error {
	return errors.New("create a genesis: not within an update")
}
