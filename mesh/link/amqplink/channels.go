package amqplink

import (
	"context"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// maxIdle bounds the channels a pool keeps between calls; a burst of
// concurrent calls opens more, and closes them when done.
const maxIdle = 8

// pooled is a channel of one kind.
type pooled interface {
	alive() bool
	close()
}

// pool keeps the idle channels of one kind. get hands one to a single
// call; put gives it back unless it died.
type pool[T pooled] struct {
	open func(context.Context) (T, error)

	mu     sync.Mutex
	idle   []T
	closed bool
}

func newPool[T pooled](open func(context.Context) (T, error)) *pool[T] {
	return &pool[T]{open: open}
}

func (p *pool[T]) get(ctx context.Context) (T, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if c.alive() {
			p.mu.Unlock()
			return c, nil
		}
		c.close()
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		var zero T
		return zero, link.ErrClosed
	}
	return p.open(ctx)
}

func (p *pool[T]) put(c T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !c.alive() || len(p.idle) >= maxIdle {
		c.close()
		return
	}
	p.idle = append(p.idle, c)
}

// discard closes a channel that must not be used again.
func (p *pool[T]) discard(c T) { c.close() }

func (p *pool[T]) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
}

// publisher is a channel in confirm mode: a publish is done when the
// broker confirms it.
type publisher struct {
	ch     *amqp.Channel
	closed chan *amqp.Error
}

func (b *Bus) openPublisher(ctx context.Context) (*publisher, error) {
	ch, err := b.openChannel(ctx)
	if err != nil {
		return nil, err
	}
	p := &publisher{ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}
	if err := bounded(ctx, ch, func() error { return ch.Confirm(false) }); err != nil {
		p.close()
		return nil, fmt.Errorf("select confirms: %w", mapClosed(err))
	}
	return p, nil
}

func (p *publisher) alive() bool { return !p.ch.IsClosed() }
func (p *publisher) close()      { _ = p.ch.Close() }

// caller is a channel that consumes direct reply-to, the one place its
// answers can come to, and hears the calls the broker returns. It serves
// one call at a time, which reads both: an answer or a return for a call
// given up on (late, after a timeout) carries another correlation id and
// is dropped by the next call.
type caller struct {
	ch      *amqp.Channel
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
	ch, err := b.openChannel(ctx)
	if err != nil {
		return nil, err
	}
	c := &caller{ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}
	err = bounded(ctx, ch, func() error {
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
		c.close()
		return nil, fmt.Errorf("consume %s: %w", wire.DirectReplyTo, refused(err))
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

func (c *caller) alive() bool { return !c.ch.IsClosed() }
func (c *caller) close()      { _ = c.ch.Close() }
