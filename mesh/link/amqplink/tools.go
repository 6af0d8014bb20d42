package amqplink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/wire"
)

// Serve consumes the tool's queue serve.<module>.<tool>, which every
// runtime serving the tool shares, so they compete for a call. Calls are
// answered one at a time, in arrival order: the channel's prefetch is
// one, and a call is acknowledged once it is answered, so an idle runtime
// gets the next call rather than a busy one buffering it. The answer goes
// to the call's reply-to (direct reply-to) through the default exchange,
// with the call's correlation id. A tool the manifest does not declare is
// refused by the broker (its queue is not the module's to read, or does
// not exist): ErrDenied.
func (b *Bus) Serve(ctx context.Context, tool string, h link.ToolFunc) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.conn.CheckOpen(); err != nil {
		return err
	}
	c, err := b.startServer(ctx, tool, h)
	if err != nil {
		return err
	}
	b.served = append(b.served, &served{tool: tool, handler: h, c: c})
	return nil
}

// startServer consumes the tool's queue on a channel of its own; b.mu is
// held.
func (b *Bus) startServer(ctx context.Context, tool string, h link.ToolFunc) (*amqpconn.Consumer, error) {
	queue := wire.ServiceQueue(b.name, tool)
	ch, err := b.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("serve %s: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var calls <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		if err := ch.Qos(1, 0, false); err != nil {
			return err
		}
		var err error
		calls, err = ch.Consume(queue, queue, false, false, false, false, nil)
		return err
	})
	if err != nil {
		_ = ch.Close()
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("serve %s: %w: the mesh declared no queue for this tool: %w", queue, link.ErrDenied, err)
		}
		return nil, fmt.Errorf("serve %s: %w", queue, amqpconn.Refused(err))
	}
	c := amqpconn.NewConsumer(ch, closed, calls, queue, b.log)
	go c.Run(func(d amqp.Delivery) { b.answer(ch, tool, d, h) })
	return c, nil
}

// answer runs the handler for one call, replies, and acknowledges it.
func (b *Bus) answer(ch *amqpconn.Channel, tool string, d amqp.Delivery, h link.ToolFunc) {
	defer func() {
		if err := d.Ack(false); err != nil {
			b.log.Error("acknowledge tool call", "tool", tool, "err", err)
		}
	}()
	if d.ReplyTo == "" {
		b.log.Warn("tool call without a reply-to ignored", "tool", tool)
		return
	}
	// The answer goes through the default exchange, which routes to any
	// queue by name: answered blindly, a call naming another module's
	// queue as its reply-to would have this module write into it. Only
	// direct reply-to, the caller's own channel, is answered.
	if err := wire.CheckDirectReplyTo(d.ReplyTo); err != nil {
		b.log.Warn("tool call refused: its reply-to is not a direct reply-to", "tool", tool, "err", err)
		return
	}
	reply := h(b.cfg.Context, link.Message{Header: wire.HeadersFromTable(d.Headers, ""), Body: d.Body})
	err := ch.Publish("", d.ReplyTo, false, false, amqp.Publishing{
		CorrelationId: d.CorrelationId,
		Headers:       amqp.Table(wire.HeadersToTable(reply.Header)),
		DeliveryMode:  amqp.Transient,
		Body:          reply.Body,
	})
	if err != nil {
		b.log.Error("answer tool call", "tool", tool, "err", err)
	}
}

// Request calls module's tool: a mandatory publish to mesh.rpc with the
// routing key serve.<module>.<tool>, reply-to direct reply-to, a fresh
// correlation id and an expiration of the time left to wait. The reply
// is returned as it came.
//
// The mesh declares every service queue, so nobody serving a tool is not
// an unroutable call: the queue is checked passively first (which needs
// no permission) for a consumer, and with none the call is sent as a
// probe the broker drops at once (wire.CallExpirationProbe). Either way
// it goes through the broker's permission check, so a call the account
// may not make is ErrDenied before anything else; a probe confirmed, or a
// call returned unroutable (312, no queue at all), is ErrNoResponders;
// the context ending is ErrTimeout.
func (b *Bus) Request(ctx context.Context, module, tool string, body []byte) (link.Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
	}
	queue := wire.ServiceQueue(module, tool)
	c, served, err := b.check(ctx, queue)
	if err != nil {
		return link.Message{}, fmt.Errorf("call %s: %w", queue, err)
	}
	deadline, _ := ctx.Deadline()
	expiration := wire.CallExpirationProbe
	if served {
		expiration = wire.CallExpiration(time.Until(deadline))
	}
	id := correlationID()
	c.returned("") // drop what calls given up on left behind
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, wire.ExchangeRPC, queue, true, false, amqp.Publishing{
		ReplyTo:       wire.DirectReplyTo,
		CorrelationId: id,
		Expiration:    expiration,
		DeliveryMode:  amqp.Transient,
		Body:          body,
	})
	if err != nil {
		b.callers.Discard(c)
		return link.Message{}, fmt.Errorf("call %s: %w", queue, amqpconn.SendError(ctx, err))
	}
	noResponders := func(r amqp.Return) error {
		return fmt.Errorf("call %s: %w: the broker returned it: %d %s", queue, link.ErrNoResponders, r.ReplyCode, r.ReplyText)
	}
	confirmed := dc.Done()
	for {
		select {
		case d, ok := <-c.replies:
			if !ok {
				return link.Message{}, fmt.Errorf("call %s: %w", queue, amqpconn.Refused(amqpconn.CloseCause(c.closed)))
			}
			if d.CorrelationId != id {
				continue // the answer to a call given up on
			}
			b.callers.Put(c)
			return link.Message{Header: wire.HeadersFromTable(d.Headers, ""), Body: d.Body}, nil
		case r, ok := <-c.returns:
			if !ok {
				return link.Message{}, fmt.Errorf("call %s: %w", queue, amqpconn.Refused(amqpconn.CloseCause(c.closed)))
			}
			if r.CorrelationId != id {
				continue
			}
			b.callers.Put(c)
			return link.Message{}, noResponders(r)
		case <-confirmed:
			confirmed = nil
			switch {
			case !c.Alive():
				return link.Message{}, fmt.Errorf("call %s: %w", queue, amqpconn.Refused(amqpconn.CloseCause(c.closed)))
			case !dc.Acked():
				b.callers.Put(c)
				return link.Message{}, fmt.Errorf("call %s: the broker refused the call", queue)
			}
			if r, ok := c.returned(id); ok {
				b.callers.Put(c)
				return link.Message{}, noResponders(r)
			}
			if !served {
				// The probe passed the permission check, reached the
				// queue, and found nobody to take it.
				b.callers.Put(c)
				return link.Message{}, fmt.Errorf("call %s: %w: the service queue has no consumer", queue, link.ErrNoResponders)
			}
		case e := <-c.closed:
			var cause error = amqp.ErrClosed
			if e != nil {
				cause = e
			}
			return link.Message{}, fmt.Errorf("call %s: %w", queue, amqpconn.Refused(cause))
		case <-ctx.Done():
			// A late answer or return is dropped by the next call.
			b.callers.Put(c)
			return link.Message{}, fmt.Errorf("call %s: %w: %w", queue, link.ErrTimeout, ctx.Err())
		}
	}
}

// check declares the service queue passively on a caller and reports
// whether anyone consumes it. A queue that does not exist closes the
// channel (404); the call then goes out on a fresh one, as a probe.
func (b *Bus) check(ctx context.Context, queue string) (*caller, bool, error) {
	c, err := b.callers.Get(ctx)
	if err != nil {
		return nil, false, err
	}
	var q amqp.Queue
	err = amqpconn.Bounded(ctx, c.ch, func() error {
		var err error
		q, err = c.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		return err
	})
	switch {
	case err == nil:
		return c, q.Consumers > 0, nil
	case amqpconn.BrokerCode(err) == wire.AMQPNotFound:
		b.callers.Discard(c)
		c, err = b.callers.Get(ctx)
		return c, false, err
	default:
		b.callers.Discard(c)
		return nil, false, amqpconn.Refused(err)
	}
}

// correlationID is a call's correlation id: random, so that an answer to
// a call given up on never matches a later one.
func correlationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
