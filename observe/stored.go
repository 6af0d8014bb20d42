package observe

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Stored is how many messages the stream capturing a subject holds on
// it; Stream is empty when no stream of the account captures it.
type Stored struct {
	Stream string
	Count  uint64
}

// StoredOn asks the server, in the account js reaches, which stream
// captures subject and how many messages it holds on it.
func StoredOn(ctx context.Context, js jetstream.JetStream, subject string) (Stored, error) {
	name, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return Stored{}, nil
	}
	if err != nil {
		return Stored{}, fmt.Errorf("which stream captures %s: %w", subject, err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return Stored{}, fmt.Errorf("read stream %s: %w", name, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return Stored{}, fmt.Errorf("read stream %s: %w", name, err)
	}
	return Stored{Stream: name, Count: info.State.Subjects[subject]}, nil
}

// Pending is what a consumer has yet to settle: delivered and awaiting
// an ack, and not yet delivered.
type Pending struct {
	AckPending int
	Pending    uint64
}

// PendingOn reads consumer's pending counts on stream.
func PendingOn(ctx context.Context, js jetstream.JetStream, stream, consumer string) (Pending, error) {
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return Pending{}, fmt.Errorf("read consumer %s: %w", consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return Pending{}, fmt.Errorf("read consumer %s: %w", consumer, err)
	}
	return Pending{AckPending: info.NumAckPending, Pending: info.NumPending}, nil
}
