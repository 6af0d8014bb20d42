package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// statusRetry is how long a delivery the status could not be saved for
// waits before it is delivered again.
const statusRetry = time.Second

// ackTimeout bounds the wait for the server to confirm an ack.
const ackTimeout = 5 * time.Second

// FollowStatus starts folding the provisioner events of EVENTS into the
// status of the state directory dir, through the controller's consumer
// (wire.StatusConsumer), and returns once the consumer is bound; stop
// ends it and waits for the delivery in hand. Each delivery is saved
// before it is acknowledged: a controller stopped between the two is
// handed the event again and recognises it by its sequence, so nothing is
// lost and nothing applied twice. A delivery whose status cannot be saved
// is asked again after statusRetry; an event that cannot be read is logged
// and terminated, since reading it again will not help.
//
// An EVENTS deleted and created again numbers its events from 1, below
// the status's Through: FollowStatus compares the stream with the one the
// status was folded from (Status.Rebase) before it binds, and folds a new
// one from its start. (A stream recreated under a running controller takes
// the controller's consumer with it; the controller asserts the consumer,
// and so follows the new stream, when it starts again.)
func FollowStatus(ctx context.Context, js jetstream.JetStream, dir string, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := LoadStatus(dir)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", wire.StreamEvents, err)
	}
	info := stream.CachedInfo()
	if changed, why := st.Rebase(info.Created, info.State.LastSeq); changed {
		if why != "" {
			log.Warn("EVENTS is not the stream the status was folded from; folding it from its start", "why", why)
		}
		if err := SaveStatus(dir, st); err != nil {
			return nil, err
		}
	}
	cons, err := stream.Consumer(ctx, wire.StatusConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s on %s: %w", wire.StatusConsumer, wire.StreamEvents, err)
	}
	// Consume calls the handler for one message at a time, so st needs no
	// lock.
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		st = foldDelivery(dir, st, msg, log)
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Warn("status consumer", "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", wire.StatusConsumer, wire.StreamEvents, err)
	}
	return func() {
		cc.Stop()
		<-cc.Closed()
	}, nil
}

// foldDelivery applies one delivery to st, saves the result and settles
// the delivery. It returns the status the next delivery applies to: the new
// one once saved, st unchanged when saving failed and the delivery will
// come again.
func foldDelivery(dir string, st Status, msg jetstream.Msg, log *slog.Logger) Status {
	meta, err := msg.Metadata()
	if err != nil {
		log.Error("status delivery without metadata; terminated", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return st
	}
	seq := meta.Sequence.Stream
	next := st.clone()
	changed, applyErr := next.Apply(seq, msg.Subject(), msg.Headers(), msg.Data())
	if next.Through == st.Through {
		// A redelivery of what is already saved.
		ackStatus(msg, log)
		return st
	}
	if err := SaveStatus(dir, next); err != nil {
		log.Error("status not saved; the event will come again", "seq", seq, "err", err)
		_ = msg.NakWithDelay(statusRetry)
		return st
	}
	if applyErr != nil { // ErrBadStatusEvent: its sequence is passed and saved
		log.Warn("provisioner event refused; terminated", "seq", seq, "err", applyErr)
		_ = msg.Term()
		return next
	}
	if changed {
		log.Info("status changed", "seq", seq, "subject", msg.Subject(), "failing", len(next.Failing))
	}
	ackStatus(msg, log)
	return next
}

// ackStatus acknowledges and waits for the server to confirm it, so that a
// lost ack shows in the log rather than as a silent redelivery.
func ackStatus(msg jetstream.Msg, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("status ack not confirmed; the event may come again and be recognised", "subject", msg.Subject(), "err", err)
	}
}
