package observe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// MaxDeliveries is the server's advisory that a message exhausted a
// consumer's deliveries (wire's, which the controller reads too).
type MaxDeliveries = wire.MaxDeliveries

// DeadLetter is the advisory DEAD holds that consumer gave up on the
// message of stream sequence seq, or nil when it holds none. It reads
// DEAD through js, in the mesh account.
func DeadLetter(ctx context.Context, js jetstream.JetStream, consumer string, seq uint64) (*MaxDeliveries, error) {
	dead, err := js.Stream(ctx, wire.StreamDead)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.StreamDead, err)
	}
	info, err := dead.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.StreamDead, err)
	}
	for n := info.State.FirstSeq; n <= info.State.LastSeq && n > 0; n++ {
		msg, err := dead.GetMsg(ctx, n)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // dropped as the oldest since Info
		}
		if err != nil {
			return nil, fmt.Errorf("read %s sequence %d: %w", wire.StreamDead, n, err)
		}
		if a, err := wire.ParseMaxDeliveries(msg.Data); err == nil &&
			a.Stream == wire.StreamEvents && a.Consumer == consumer && a.StreamSeq == seq {
			return &a, nil
		}
	}
	return nil, nil
}

// FailDeliveries is a consumer's handler that keeps failing: it pulls
// from consumer on stream through js and naks every delivery of stream
// sequence seq (others too, so they come again), until the server has
// stopped handing seq out (one pull after the last came back empty). It
// returns how many times seq was delivered.
func FailDeliveries(ctx context.Context, js jetstream.JetStream, stream, consumer string, seq uint64, wait time.Duration) (int, error) {
	cons, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return 0, fmt.Errorf("bind consumer %s: %w", consumer, err)
	}
	delivered := 0
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			return delivered, fmt.Errorf("fetch from %s: %w", consumer, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if meta, err := m.Metadata(); err == nil && meta.Sequence.Stream == seq {
				delivered++
			}
			if err := m.Nak(); err != nil {
				return delivered, fmt.Errorf("nak: %w", err)
			}
		}
		if got == 0 && delivered > 0 {
			return delivered, nil
		}
	}
	return delivered, ctx.Err()
}
