package amqplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
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
	p, err := b.publishers.get(ctx)
	if err != nil {
		return err
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, wire.ExchangeEvents, wire.EventRoutingKey(b.name, key), false, false, amqp.Publishing{
		Headers:      amqp.Table(wire.HeadersToTable(msg.Header)),
		ContentType:  wire.HeaderValue(msg.Header, wire.HeaderContentType),
		MessageId:    wire.HeaderValue(msg.Header, wire.HeaderEventID),
		DeliveryMode: amqp.Persistent,
		Body:         msg.Body,
	})
	if err != nil {
		b.publishers.discard(p)
		return fmt.Errorf("publish %s: %w", wire.EventRoutingKey(b.name, key), sendError(ctx, err))
	}
	select {
	case <-dc.Done():
		if dc.Acked() {
			b.publishers.put(p)
			return nil
		}
		if p.alive() {
			// A nack: the broker could not take the message.
			b.publishers.put(p)
			return fmt.Errorf("publish %s: the broker refused the event", wire.EventRoutingKey(b.name, key))
		}
		return fmt.Errorf("publish %s: %w", wire.EventRoutingKey(b.name, key), refused(closeCause(p.closed)))
	case <-ctx.Done():
		// The confirm may still come; the channel is not reused, so it
		// cannot be mistaken for another publish's.
		b.publishers.discard(p)
		return fmt.Errorf("publish %s: %w: %w", wire.EventRoutingKey(b.name, key), link.ErrTimeout, ctx.Err())
	}
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
	if err := b.checkOpen(); err != nil {
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
func (b *Bus) startConsumer(ctx context.Context) (*consumer, error) {
	queue := wire.EventsQueue(b.node, b.name)
	ch, err := b.openChannel(ctx)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var deliveries <-chan amqp.Delivery
	err = bounded(ctx, ch, func() error {
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
		if brokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: queue %s in vhost %s: %w", link.ErrNoConsumer, queue, wire.AMQPVhost, err)
		}
		return nil, fmt.Errorf("consume %s: %w", queue, refused(err))
	}
	c := newConsumer(ch, closed, deliveries, queue, b.log)
	c.requeues = newRequeues(b.log)
	go c.run(func(d amqp.Delivery) { b.cfg.Deliver(delivery{d: d, requeues: c.requeues}) })
	return c, nil
}

// delivery is one message of the events queue as the SDK sees it, and the
// requeues of its consumer.
type delivery struct {
	d        amqp.Delivery
	requeues *requeues
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
func (d delivery) Ack() error { return mapClosed(d.d.Ack(false)) }

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
func (d delivery) Nak(delay time.Duration) error { return d.requeues.after(d.d, delay) }

// Term rejects it for good. The queue dead-letters it to mesh.dead, where
// its x-death header says "rejected", apart from those that exhausted
// their deliveries; AMQP carries no reason, which the SDK has logged.
func (d delivery) Term(string) error { return mapClosed(d.d.Reject(false)) }

// consumer is one consumer on its own channel: the events queue's, or a
// served tool's.
type consumer struct {
	ch         *amqp.Channel
	closed     chan *amqp.Error
	deliveries <-chan amqp.Delivery
	queue      string
	log        *slog.Logger
	done       chan struct{}
	// requeues are the events consumer's deliveries waiting to be given
	// back; nil for a tool's consumer.
	requeues *requeues
}

func newConsumer(ch *amqp.Channel, closed chan *amqp.Error, deliveries <-chan amqp.Delivery, queue string, log *slog.Logger) *consumer {
	return &consumer{ch: ch, closed: closed, deliveries: deliveries, queue: queue, log: log, done: make(chan struct{})}
}

// run hands each delivery to f, one at a time, until the consumer is
// cancelled (every delivery already fetched is still handed over) or the
// channel closes. A channel closed with the connection is the bus's to
// resume; one the broker closed alone is said here.
func (c *consumer) run(f func(amqp.Delivery)) {
	defer close(c.done)
	for d := range c.deliveries {
		f(d)
	}
	if !c.ch.IsClosed() {
		return // cancelled by stop
	}
	if cause := closeCause(c.closed); !errors.Is(cause, amqp.ErrClosed) && !isConnectionLevel(cause) {
		c.log.Error("consuming stopped: the channel was closed", "queue", c.queue, "err", cause)
	}
}

// isConnectionLevel reports whether err is the end of the whole connection
// (amqp091 hands it to every channel), which the bus reconnects from.
func isConnectionLevel(err error) bool {
	var e *amqp.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case amqp.ConnectionForced, amqp.FrameError, amqp.ChannelError, amqp.InternalError, amqp.UnexpectedFrame:
		return true
	}
	return !e.Server
}

// stop cancels the consumer, waits until what was fetched has been handed
// over and settled, and closes the channel (the broker requeues what is
// still unsettled).
func (c *consumer) stop(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var errs []error
	if !c.ch.IsClosed() {
		if err := bounded(ctx, c.ch, func() error { return c.ch.Cancel(c.queue, false) }); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, fmt.Errorf("cancel consumer of %s: %w", c.queue, err))
		}
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("drain %s: %w", c.queue, link.ErrTimeout))
	}
	if c.requeues != nil {
		c.requeues.flush()
	}
	if err := c.ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		errs = append(errs, fmt.Errorf("close channel of %s: %w", c.queue, err))
	}
	return errors.Join(errs...)
}
