package amqpconn

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
)

// maxIdle bounds the channels a pool keeps between calls; a burst of
// concurrent calls opens more, and closes them when done.
const maxIdle = 8

// Pooled is a channel of one kind.
type Pooled interface {
	Alive() bool
	Close()
}

// Pool keeps the idle channels of one kind. Get hands one to a single
// call; Put gives it back unless it died. A channel per call is what lets
// a refusal (the broker closes the channel it came on) be reported to the
// call that caused it, and no other.
type Pool[T Pooled] struct {
	open func(context.Context) (T, error)

	mu     sync.Mutex
	idle   []T
	closed bool
}

// NewPool is a pool whose channels open makes.
func NewPool[T Pooled](open func(context.Context) (T, error)) *Pool[T] {
	return &Pool[T]{open: open}
}

// Get is an idle channel, or a new one.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if c.Alive() {
			p.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		var zero T
		return zero, link.ErrClosed
	}
	return p.open(ctx)
}

// Put gives c back for the next call.
func (p *Pool[T]) Put(c T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !c.Alive() || len(p.idle) >= maxIdle {
		c.Close()
		return
	}
	p.idle = append(p.idle, c)
}

// Discard closes a channel that must not be used again.
func (p *Pool[T]) Discard(c T) { c.Close() }

// Close closes the idle channels and refuses new ones.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.Close()
	}
	p.idle = nil
}

// Publisher is a channel in confirm mode: a publish is done when the
// broker confirms it.
type Publisher struct {
	Ch     *Channel
	closed chan *amqp.Error
	// returns hears mandatory publishes the broker could not route.
	returns chan amqp.Return
}

// OpenPublisher opens a channel of c in confirm mode.
func (c *Conn) OpenPublisher(ctx context.Context) (*Publisher, error) {
	ch, err := c.Channel(ctx)
	if err != nil {
		return nil, err
	}
	p := &Publisher{Ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}
	p.returns = ch.NotifyReturn(make(chan amqp.Return, returnsBuffer))
	if err := Bounded(ctx, ch, func() error { return ch.Confirm(false) }); err != nil {
		p.Close()
		return nil, fmt.Errorf("select confirms: %w", MapClosed(err))
	}
	return p, nil
}

// returnsBuffer holds the returns of publishes given up on, so that the
// broker's reader never waits on them.
const returnsBuffer = 16

// Alive says whether the channel is open.
func (p *Publisher) Alive() bool { return !p.Ch.IsClosed() }

// Close closes the channel.
func (p *Publisher) Close() { _ = p.Ch.Close() }

// ErrNacked means the broker confirmed a publish negatively: it did not
// take the message (a full queue that refuses publishes).
var ErrNacked = errors.New("the broker refused the message")

// ErrUnroutable means a mandatory publish reached no queue (the broker
// returned it: 312 NO_ROUTE).
var ErrUnroutable = errors.New("the broker routed the message to no queue")

// Publish sends msg through one of pool's channels and waits for the
// broker's confirm: nil once the broker holds it; ErrNacked for a
// negative confirm; ErrUnroutable for a mandatory publish returned;
// link.ErrDenied for a publish the account has no grant for (the broker
// closed the channel, 403); link.ErrTimeout when ctx ended first. what
// names the publish in errors.
func Publish(ctx context.Context, pool *Pool[*Publisher], what, exchange, key string, mandatory bool, msg amqp.Publishing) error {
	p, err := pool.Get(ctx)
	if err != nil {
		return fmt.Errorf("publish %s: %w", what, err)
	}
	if mandatory {
		p.drainReturns()
	}
	dc, err := p.Ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		pool.Discard(p)
		return fmt.Errorf("publish %s: %w", what, SendError(ctx, err))
	}
	select {
	case <-dc.Done():
		if dc.Acked() {
			// amqp091 hands a return over before it reads the confirm of
			// the same publish, so a returned message's return is here.
			if mandatory && p.returned(msg.MessageId) {
				pool.Put(p)
				return fmt.Errorf("publish %s: %w", what, ErrUnroutable)
			}
			pool.Put(p)
			return nil
		}
		if p.Alive() {
			pool.Put(p)
			return fmt.Errorf("publish %s: %w", what, ErrNacked)
		}
		return fmt.Errorf("publish %s: %w", what, Refused(CloseCause(p.closed)))
	case <-ctx.Done():
		// The confirm may still come; the channel is not reused, so it
		// cannot be mistaken for another publish's.
		pool.Discard(p)
		return fmt.Errorf("publish %s: %w: %w", what, link.ErrTimeout, ctx.Err())
	}
}

// drainReturns drops the returns of publishes given up on.
func (p *Publisher) drainReturns() {
	for {
		select {
		case <-p.returns:
		default:
			return
		}
	}
}

// returned says whether the broker returned the publish of message id.
func (p *Publisher) returned(id string) bool {
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				return false
			}
			if r.MessageId == id {
				return true
			}
		default:
			return false
		}
	}
}
