package amqplink

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/wire"
)

// prefetch is how many deliveries of the events queue may be unsettled
// at once. The SDK holds a delivery no handler wants while the module may
// still subscribe, so a prefetch of one would stall the queue behind it.
const prefetch = 64

// Publish sends one event to mesh.events with the routing key
// <module>.<key>, the envelope's headers as message headers, x-event-id
// as message-id and content-type as the property too, persistent, and
// waits for the broker's confirm. A routing key outside the module's
// emits is refused by the broker (403 on the channel): ErrDenied.
func (b *Bus) Publish(ctx context.Context, key string, msg link.Message) error {
	rk := wire.EventRoutingKey(b.name, key)
	err := amqpconn.Publish(ctx, b.publishers, rk, wire.ExchangeEvents, rk, false, amqp.Publishing{
		Headers:      amqp.Table(wire.HeadersToTable(msg.Header)),
		ContentType:  wire.HeaderValue(msg.Header, wire.HeaderContentType),
		MessageId:    wire.HeaderValue(msg.Header, wire.HeaderEventID),
		DeliveryMode: amqp.Persistent,
		Body:         msg.Body,
	})
	if errors.Is(err, amqpconn.ErrNacked) {
		return fmt.Errorf("publish %s: the broker refused the event", rk)
	}
	return err
}

// Consume starts consuming the module's events queue
// <node>.<module>.events on the first call. The queue is checked with a
// passive declare, which creates nothing; a queue the mesh has not
// declared (or a module that consumes nothing, for which it declares
// none) is ErrNoConsumer naming it. Later calls add nothing: the mesh
// bound the queue to every pattern of the manifest.
func (b *Bus) Consume(ctx context.Context, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consuming {
		return nil
	}
	if err := b.conn.CheckOpen(); err != nil {
		return err
	}
	c, err := b.startConsumer(ctx)
	if err != nil {
		return err
	}
	b.consumer, b.consuming = c, true
	return nil
}

// startConsumer consumes the events queue on a channel of its own; b.mu is
// held.
func (b *Bus) startConsumer(ctx context.Context) (*amqpconn.Consumer, error) {
	queue := wire.EventsQueue(b.node, b.name)
	ch, err := b.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var deliveries <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
			return err
		}
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return err
		}
		var err error
		// The queue is the consumer tag: one consumer per channel.
		deliveries, err = ch.Consume(queue, queue, false, false, false, false, nil)
		return err
	})
	if err != nil {
		_ = ch.Close()
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: queue %s in vhost %s: %w", link.ErrNoConsumer, queue, wire.AMQPVhost, err)
		}
		return nil, fmt.Errorf("consume %s: %w", queue, amqpconn.Refused(err))
	}
	c := amqpconn.NewConsumer(ch, closed, deliveries, queue, b.log)
	c.Requeues = amqpconn.NewRequeues(b.log)
	go c.Run(func(d amqp.Delivery) { b.cfg.Deliver(delivery{d: d, requeues: c.Requeues}) })
	return c, nil
}

// delivery is one message of the events queue as the SDK sees it, and the
// requeues of its consumer.
type delivery struct {
	d        amqp.Delivery
	requeues *amqpconn.Requeues
}

// Key is the routing key, <module>.<key>; "" for one that is not an
// event's, which the SDK refuses.
func (d delivery) Key() string {
	if _, _, err := wire.EventKeyFromRoutingKey(d.d.RoutingKey); err != nil {
		return ""
	}
	return d.d.RoutingKey
}

func (d delivery) Message() link.Message {
	return link.Message{Header: wire.HeadersFromTable(d.d.Headers, d.d.ContentType), Body: d.d.Body}
}

// Ack settles the delivery as done.
func (d delivery) Ack() error { return amqpconn.MapClosed(d.d.Ack(false)) }

// Attempt is the quorum queue's count: x-delivery-count is how often the
// message was given back before, absent the first time. A quorum queue's
// delivery limit is not told to its consumers, so limit is 0.
func (d delivery) Attempt() (n, limit int) {
	var returned int64
	switch v := d.d.Headers[wire.AMQPDeliveryCount].(type) {
	case int64:
		returned = v
	case int32:
		returned = int64(v)
	case int:
		returned = int64(v)
	}
	return int(min(max(returned, 0), 1<<30)) + 1, 0
}

// Nak requeues it, after delay (requeues); the quorum queue counts the
// delivery and dead-letters the message to mesh.dead past its delivery
// limit.
func (d delivery) Nak(delay time.Duration) error { return d.requeues.After(d.d, delay) }

// Term rejects it for good. The queue dead-letters it to mesh.dead, where
// its x-death header says "rejected", apart from those that exhausted
// their deliveries; AMQP carries no reason, which the SDK has logged.
func (d delivery) Term(string) error { return amqpconn.MapClosed(d.d.Reject(false)) }
