package buses

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/natslink"
	"github.com/meshbus/mesh/mesh/wire"
)

// Emitters gives the credential on the new bus of the module that emitted
// an event, by the emitting node (x-node, "" when the event has none) and
// module.
type Emitters func(ctx context.Context, node, module string) (wire.Credential, error)

// MoveEvents moves what is left in a consumer's events queue on the broker
// onto NATS's EVENTS, at the end of a cutover (docs/decisions/0013), so
// that an event emitted on AMQP and not consumed before its consumer
// moved is still consumed. consumer is the consuming module's credential
// on the broker (the queue is its own, wire.EventsQueue); each event is
// published again as the module that emitted it, through the NATS
// binding, as that module would have published it there (its subject,
// its headers, its event id as Nats-Msg-Id), and only then acknowledged
// on the broker. The same event waiting in two consumers' queues is
// stored once: the stream drops the second as a duplicate. A move stopped
// half-way is redone by the next call: an event published and not yet
// acknowledged is published again, and dropped as a duplicate within the
// stream's window. It says how many it moved.
func MoveEvents(ctx context.Context, consumer wire.Credential, emitters Emitters, log *slog.Logger) (moved int, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := amqpconn.Dial(ctx, consumer, amqpconn.Options{Logger: log, Name: consumer.User() + " (cutover)"})
	if err != nil {
		return 0, fmt.Errorf("move the events of %s: %w", consumer.User(), err)
	}
	defer conn.Close(time.Now().Add(5*time.Second), nil)
	ch, err := conn.Channel(ctx)
	if err != nil {
		return 0, fmt.Errorf("move the events of %s: %w", consumer.User(), err)
	}
	queue := wire.EventsQueue(consumer.Node, consumer.Module)
	publishers := map[string]link.Transport{}
	defer func() {
		for _, t := range publishers {
			_ = t.Close()
		}
	}()
	for ctx.Err() == nil {
		var d amqp.Delivery
		var ok bool
		err := amqpconn.Bounded(ctx, ch, func() error {
			var err error
			d, ok, err = ch.Get(queue, false)
			return err
		})
		if err != nil {
			return moved, fmt.Errorf("move the events of %s: take from %s: %w", consumer.User(), queue, amqpconn.MapClosed(err))
		}
		if !ok {
			return moved, nil // the queue is empty
		}
		module, key, err := wire.EventKeyFromRoutingKey(d.RoutingKey)
		if err != nil {
			// Not an event the mesh could deliver on either bus: the
			// broker dead-letters it, as a consumer's refusal would.
			log.Warn("cutover: an event that cannot move refused", "queue", queue, "err", err)
			if err := d.Reject(false); err != nil {
				return moved, amqpconn.MapClosed(err)
			}
			continue
		}
		msg := link.Message{Header: wire.HeadersFromTable(d.Headers, d.ContentType), Body: d.Body}
		node := wire.HeaderValue(msg.Header, wire.HeaderNode)
		pub, err := publisher(ctx, publishers, emitters, node, module, log)
		if err != nil {
			_ = d.Nack(false, true)
			return moved, err
		}
		if err := pub.Publish(ctx, key, msg); err != nil {
			_ = d.Nack(false, true)
			return moved, fmt.Errorf("move event %s of %s: %w", wire.HeaderValue(msg.Header, wire.HeaderEventID), module, err)
		}
		if err := d.Ack(false); err != nil {
			return moved, amqpconn.MapClosed(err)
		}
		moved++
	}
	return moved, ctx.Err()
}

// publisher is the NATS binding as the emitting module, dialled once.
func publisher(ctx context.Context, open map[string]link.Transport, emitters Emitters, node, module string, log *slog.Logger) (link.Transport, error) {
	id := node + "/" + module
	if t, ok := open[id]; ok {
		return t, nil
	}
	cred, err := emitters(ctx, node, module)
	if err != nil {
		return nil, fmt.Errorf("the emitter %s of node %q on the new bus: %w", module, node, err)
	}
	if bus, err := Of(cred); err != nil || bus != NATS {
		return nil, fmt.Errorf("the emitter %s's credential dials %s, not NATS", cred.User(), cred.Scheme())
	}
	t, err := natslink.Dial(ctx, link.Config{Credential: cred, Logger: log, Timeout: link.DefaultTimeout, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("dial NATS as %s: %w", cred.User(), err)
	}
	open[id] = t
	return t, nil
}
