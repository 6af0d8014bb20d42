package amqpconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
)

// Consumer is one queue consumed on a channel of its own.
type Consumer struct {
	Ch         *Channel
	closed     chan *amqp.Error
	deliveries <-chan amqp.Delivery
	queue      string
	log        *slog.Logger
	done       chan struct{}
	// Requeues are the deliveries waiting to be given back; nil for a
	// consumer that never delays one.
	Requeues *Requeues
}

// NewConsumer is the consumer of queue on ch (whose close is heard on
// closed), its deliveries those ch.Consume returned; the consumer tag
// is the queue's name.
func NewConsumer(ch *Channel, closed chan *amqp.Error, deliveries <-chan amqp.Delivery, queue string, log *slog.Logger) *Consumer {
	return &Consumer{Ch: ch, closed: closed, deliveries: deliveries, queue: queue, log: log, done: make(chan struct{})}
}

// Done is closed once Run has returned.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// Run hands each delivery to f, one at a time, until the consumer is
// cancelled (every delivery already fetched is still handed over) or the
// channel closes. A channel closed with the connection is the
// connection's to resume; one the broker closed alone is said here.
func (c *Consumer) Run(f func(amqp.Delivery)) {
	defer close(c.done)
	for d := range c.deliveries {
		f(d)
	}
	if !c.Ch.IsClosed() {
		return // cancelled by Stop
	}
	if cause := CloseCause(c.closed); !errors.Is(cause, amqp.ErrClosed) && !IsConnectionLevel(cause) {
		c.log.Error("consuming stopped: the channel was closed", "queue", c.queue, "err", cause)
	}
}

// Stop cancels the consumer, waits until what was fetched has been handed
// over and settled, gives back at once what waits out a delay, and
// closes the channel (the broker requeues what is still unsettled).
func (c *Consumer) Stop(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var errs []error
	if !c.Ch.IsClosed() {
		if err := Bounded(ctx, c.Ch, func() error { return c.Ch.Cancel(c.queue, false) }); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, fmt.Errorf("cancel consumer of %s: %w", c.queue, err))
		}
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("drain %s: %w", c.queue, link.ErrTimeout))
	}
	if c.Requeues != nil {
		c.Requeues.Flush()
	}
	if err := c.Ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		errs = append(errs, fmt.Errorf("close channel of %s: %w", c.queue, err))
	}
	return errors.Join(errs...)
}
