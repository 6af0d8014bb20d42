package natslink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Publish sends one event through JetStream on mesh.mod.<module>.event.<key>
// with x-event-id as Nats-Msg-Id, so the server also refuses a duplicate
// inside its window, and waits for the PubAck. A duplicate the server
// recognised is acknowledged too: the event is in the stream.
func (b *Bus) Publish(ctx context.Context, key string, msg link.Message) error {
	subject := wire.EventSubject(b.name, key)
	ctx, release := b.denials.watch(ctx, subject)
	defer release()
	m := &nats.Msg{Subject: subject, Header: nats.Header(msg.Header), Data: msg.Body}
	id := nats.Header(msg.Header).Get(wire.HeaderEventID)
	if _, err := b.js.PublishMsg(ctx, m, jetstream.WithMsgID(id)); err != nil {
		return b.callError(ctx, err)
	}
	return nil
}

// Consume binds the module's consumer <node>_<module> on EVENTS on the
// first call, and starts delivering. Binding sends CONSUMER.INFO, which
// the module's account is granted for its own consumer only; a consumer
// that does not exist (or a stream that does not) is ErrNoConsumer, and
// nothing is ever created. Later calls add nothing: the controller set
// the consumer's filters from the manifest.
func (b *Bus) Consume(ctx context.Context, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consumer != nil {
		return nil
	}
	if b.nc.IsClosed() || b.nc.IsDraining() {
		return link.ErrClosed
	}
	name := wire.ModuleConsumer(b.node, b.name)
	ctx, release := b.denials.watch(ctx, wire.ConsumerInfo(wire.StreamEvents, name))
	defer release()
	cons, err := b.js.Consumer(ctx, wire.StreamEvents, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: consumer %s on stream %s: %w", link.ErrNoConsumer, name, wire.StreamEvents, err)
	case denied(ctx) != nil:
		// Only a module whose manifest consumes something may read its
		// consumer's info; for any other the controller made none.
		return fmt.Errorf("%w: consumer %s on stream %s: %w", link.ErrNoConsumer, name, wire.StreamEvents, denied(ctx))
	case err != nil:
		return fmt.Errorf("bind consumer %s: %w", name, b.callError(ctx, err))
	}
	// The consumer's delivery limit, as the controller set it when the
	// module bound: the SDK gives the last delivery back at once, so that
	// the dead letter is not held up by a delay nothing will follow.
	limit := max(cons.CachedInfo().Config.MaxDeliver, 0)
	cc, err := cons.Consume(func(m jetstream.Msg) { b.cfg.Deliver(delivery{m: m, limit: limit}) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			b.log.Warn("consuming", "consumer", name, "err", err)
		}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", name, err)
	}
	b.consumer = cc
	return nil
}

// delivery is one JetStream message as the SDK sees it; limit is its
// consumer's MaxDeliver, 0 for none.
type delivery struct {
	m     jetstream.Msg
	limit int
}

func (d delivery) Key() string {
	module, key, err := wire.EventKeyFromSubject(d.m.Subject())
	if err != nil {
		// Cannot come from a consumer filtered on module events; the SDK
		// refuses an envelope it cannot place.
		return ""
	}
	return module + "." + key
}

func (d delivery) Message() link.Message {
	return link.Message{Header: d.m.Headers(), Body: d.m.Data()}
}

// Attempt is the server's count of deliveries of this message, from the
// metadata of its ack subject.
func (d delivery) Attempt() (n, limit int) {
	md, err := d.m.Metadata()
	if err != nil {
		// Cannot come from a consumer: its messages carry an ack subject.
		return 1, d.limit
	}
	return int(min(md.NumDelivered, 1<<31)), d.limit
}

func (d delivery) Ack() error { return d.m.Ack() }

// Nak gives the message back; with a delay, the server keeps it pending
// and redelivers it once the delay has passed (-NAK {"delay":ns}), so a
// module restarting meanwhile does not shorten the wait.
func (d delivery) Nak(delay time.Duration) error {
	if delay <= 0 {
		return d.m.Nak()
	}
	return d.m.NakWithDelay(delay)
}

func (d delivery) Term(reason string) error { return d.m.TermWithReason(reason) }

// callError maps what a call through nats.go ended with to the binding's
// sentinels: a denial heard asynchronously beats the timeout it caused.
func (b *Bus) callError(ctx context.Context, err error) error {
	if d := denied(ctx); d != nil {
		return d
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: %w", link.ErrNoResponders, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: %w", link.ErrTimeout, err)
	}
	return mapClosed(err)
}
