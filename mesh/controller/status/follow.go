package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// statusRetry is how long a delivery whose status the store refused waits
// before it is delivered again; a store unavailable is waited for longer
// each time, up to statusRetryMax, so that a store away for long is not
// asked every second.
const (
	statusRetry    = time.Second
	statusRetryMax = 15 * time.Second
)

// ackTimeout bounds the wait for the server to confirm an ack, and
// saveTimeout the wait for the store to take a status.
const (
	ackTimeout  = 5 * time.Second
	saveTimeout = 5 * time.Second
)

// FollowStatus starts folding the provisioner events of EVENTS into the
// status held in st, through the controller's consumer
// (wire.StatusConsumer), and returns once the consumer is bound; stop
// ends it and waits for the delivery in hand. Each delivery is saved
// before it is acknowledged: a controller stopped between the two is
// handed the event again and recognises it by its sequence, so nothing is
// lost and nothing applied twice. A delivery whose status cannot be saved
// is asked again later (sooner when the store refused it, later each time
// while the store is unavailable); an event that cannot be read is logged
// and terminated, since reading it again will not help.
//
// An EVENTS deleted and created again numbers its events from 1, below
// the status's Through: FollowStatus compares the stream with the one the
// status was folded from (store.Status.Rebase) before it binds, and folds a new
// one from its start. (A stream recreated under a running controller takes
// the controller's consumer with it; the controller asserts the consumer,
// and so follows the new stream, when it starts again.)
//
// A bus that keeps no positions (AMQP: the zero plane.EventsOrigin) has
// no stream to compare with. Its events come from the controller's own
// queue one at a time, in order, and the one handed again after a stop is
// the last handed over: it is known by its event id (store.Status.Folded).
// Through and EventsCreated are left as they are, those of the stream the
// status was last folded from, should the mesh go back to it.
func FollowStatus(ctx context.Context, bus plane.StatusFeed, st store.Store, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	status, err := st.Status(ctx)
	if err != nil {
		return nil, err
	}
	origin, err := bus.EventsOrigin(ctx)
	if err != nil {
		return nil, err
	}
	if origin != (plane.EventsOrigin{}) {
		if changed, why := status.Rebase(origin.Created, origin.Last); changed {
			if why != "" {
				log.Warn("EVENTS is not the stream the status was folded from; folding it from its start", "why", why)
			}
			if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutStatus(ctx, status) }); err != nil {
				return nil, fmt.Errorf("save status: %w", err)
			}
		}
	}
	// The deliveries are saved after the caller's ctx served to bind: it
	// may end first.
	f := &follower{ctx: context.WithoutCancel(ctx), store: st, status: status, log: log}
	// The feed calls fold for one message at a time, so f needs no lock.
	return bus.FollowEvents(ctx, f.fold)
}

// follower folds one delivery at a time into the status it holds, which
// is the status the store holds.
type follower struct {
	ctx    context.Context
	store  store.Store
	status store.Status
	log    *slog.Logger
	// away is how long the next delivery is held while the store is
	// unavailable; zero until it is.
	away time.Duration
}

// fold applies one delivery to the status, saves the result and settles
// the delivery. Unsaved, the status stays as it was and the delivery is
// asked again: nothing is acknowledged that is not in the store.
func (f *follower) fold(msg plane.EventMsg) {
	seq, id := msg.Position(), wire.HeaderValue(msg.Header(), wire.HeaderEventID)
	log := f.log.With("seq", seq, "event", id)
	if seq == 0 && id == "" {
		log.Error("status delivery with neither a position nor an event id; terminated, since nothing would know it again", "subject", msg.Subject())
		_ = msg.Term()
		return
	}
	if f.status.Folded(seq, id) {
		// A redelivery of what is already saved.
		ackStatus(msg, log)
		return
	}
	next := f.status.Clone()
	changed, applyErr := next.Apply(seq, msg.Subject(), msg.Header(), msg.Data())
	if err := f.save(next); err != nil {
		delay := statusRetry
		if errors.Is(err, store.ErrStoreUnavailable) {
			f.away = min(max(2*f.away, statusRetry), statusRetryMax)
			delay = f.away
			log.Warn("status not saved: the store is unavailable; the event is held and comes again", "delay", delay, "err", err)
		} else {
			log.Error("status not saved; the event will come again", "delay", delay, "err", err)
		}
		_ = msg.Hold(delay)
		return
	}
	f.away = 0
	f.status = next
	if applyErr != nil { // store.ErrBadStatusEvent: its sequence is passed and saved
		log.Warn("provisioner event refused; terminated", "err", applyErr)
		_ = msg.Term()
		return
	}
	if changed {
		log.Info("status changed", "subject", msg.Subject(), "failing", len(next.Failing))
	}
	ackStatus(msg, log)
}

func (f *follower) save(s store.Status) error {
	ctx, cancel := context.WithTimeout(f.ctx, saveTimeout)
	defer cancel()
	return f.store.Update(ctx, func(tx store.Tx) error { return tx.PutStatus(ctx, s) })
}

// ackStatus acknowledges and waits for the server to confirm it, so that a
// lost ack shows in the log rather than as a silent redelivery.
func ackStatus(msg plane.EventMsg, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := msg.Ack(ctx); err != nil {
		log.Warn("status ack not confirmed; the event may come again and be recognised", "subject", msg.Subject(), "err", err)
	}
}
