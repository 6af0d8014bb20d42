package observe

import (
	"context"
	"errors"
	"fmt"

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
