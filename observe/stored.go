package observe

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/wire"
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
	p, err := ProgressOn(ctx, js, stream, consumer)
	return p.Pending, err
}

// Progress is how far a consumer has come, as the server keeps it.
type Progress struct {
	Pending
	// AckFloor is the stream sequence below which every message is
	// acknowledged (or terminated).
	AckFloor uint64
	// Redelivered counts the deliveries awaiting an ack that are not their
	// message's first.
	Redelivered int
	// MaxDeliver is the consumer's configured limit of deliveries.
	MaxDeliver int
	// Delivered counts every delivery the consumer made, first or again.
	Delivered uint64
}

// Acknowledged says the consumer is done with stream sequence seq and
// waits for no ack of anything.
func (p Progress) Acknowledged(seq uint64) bool { return p.AckFloor >= seq && p.AckPending == 0 }

// ProgressOn reads consumer's progress on stream.
func ProgressOn(ctx context.Context, js jetstream.JetStream, stream, consumer string) (Progress, error) {
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return Progress{}, fmt.Errorf("read consumer %s: %w", consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return Progress{}, fmt.Errorf("read consumer %s: %w", consumer, err)
	}
	return Progress{
		Pending:     Pending{AckPending: info.NumAckPending, Pending: info.NumPending},
		AckFloor:    info.AckFloor.Stream,
		Redelivered: info.NumRedelivered,
		MaxDeliver:  info.Config.MaxDeliver,
		Delivered:   info.Delivered.Consumer,
	}, nil
}

// HeldReports are node's reports CONTROL holds (not yet taken by the
// controller), oldest first, read message by message: a work-queue stream
// takes no second consumer to read them with.
func HeldReports(ctx context.Context, js jetstream.JetStream, node string) ([]wire.Report, error) {
	st, err := js.Stream(ctx, wire.StreamControl)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.StreamControl, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.StreamControl, err)
	}
	var out []wire.Report
	for n := info.State.FirstSeq; n <= info.State.LastSeq && n > 0; n++ {
		m, err := st.GetMsg(ctx, n)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // taken since Info
		}
		if err != nil {
			return nil, fmt.Errorf("read %s sequence %d: %w", wire.StreamControl, n, err)
		}
		if m.Subject != wire.NodeReport(node) {
			continue
		}
		r, err := wire.ParseReport(m.Subject, m.Data)
		if err != nil {
			return nil, fmt.Errorf("%s sequence %d: %w", wire.StreamControl, n, err)
		}
		out = append(out, r)
	}
	return out, nil
}
