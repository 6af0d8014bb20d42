package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// maxDeliveriesType is the schema type of the server's MAX_DELIVERIES
// advisory, the one DEAD captures.
const maxDeliveriesType = "io.nats.jetstream.advisory.v1.max_deliver"

// MaxDeliveries is the server's advisory that a message exhausted a
// consumer's deliveries: a dead letter, as DEAD holds it.
type MaxDeliveries struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries int    `json:"deliveries"`
}

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
		var a MaxDeliveries
		if json.Unmarshal(msg.Data, &a) == nil && a.Type == maxDeliveriesType &&
			a.Stream == wire.StreamEvents && a.Consumer == consumer && a.StreamSeq == seq {
			return &a, nil
		}
	}
	return nil, nil
}
