package amqplink

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/wire"
)

// caller is a channel that consumes direct reply-to, the one place its
// answers can come to, and hears the calls the broker returns. It serves
// one call at a time, which reads both: an answer or a return for a call
// given up on (late, after a timeout) carries another correlation id and
// is dropped by the next call.
type caller struct {
	ch      *amqpconn.Channel
	closed  chan *amqp.Error
	replies <-chan amqp.Delivery
	// returns is buffered: amqp091 hands a return over before it reads the
	// confirm of the same publish, so a call that sees its confirm finds
	// its return already here.
	returns chan amqp.Return
}

// returnsBuffer holds the returns of calls given up on until the next
// call drops them, so that the broker's reader never waits on them.
const returnsBuffer = 16

func (b *Bus) openCaller(ctx context.Context) (*caller, error) {
	ch, err := b.conn.Channel(ctx)
	if err != nil {
		return nil, err
	}
	c := &caller{ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}
	err = amqpconn.Bounded(ctx, ch, func() error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		// Direct reply-to is consumed without acks, and needs no queue
		// declared and no permission.
		var err error
		c.replies, err = ch.Consume(wire.DirectReplyTo, "", true, false, false, false, nil)
		return err
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("consume %s: %w", wire.DirectReplyTo, amqpconn.Refused(err))
	}
	c.returns = ch.NotifyReturn(make(chan amqp.Return, returnsBuffer))
	return c, nil
}

// returned takes the return of the call id if the broker sent one,
// dropping those of calls given up on.
func (c *caller) returned(id string) (amqp.Return, bool) {
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				return amqp.Return{}, false
			}
			if r.CorrelationId == id {
				return r, true
			}
		default:
			return amqp.Return{}, false
		}
	}
}

func (c *caller) Alive() bool { return !c.ch.IsClosed() }
func (c *caller) Close()      { _ = c.ch.Close() }
