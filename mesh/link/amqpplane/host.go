package amqpplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// HostOptions tune DialHost.
type HostOptions struct {
	// Timeout bounds a call whose context has no deadline.
	Timeout time.Duration
	// Address is host:port to dial instead of the credential's.
	Address string
	Logger  *slog.Logger
}

// host is plane.Host on one connection in the control plane's virtual
// host, as the node's host.
type host struct {
	conn       *amqpconn.Conn
	user       string
	publishers *amqpconn.Pool[*amqpconn.Publisher]
	timeout    time.Duration

	mu   sync.Mutex
	last map[string]plane.Declared // the last declaration taken, by node
}

// DialHost connects as a node's host (cred is the host's credential). A
// login the broker refuses wraps plane.ErrLoginRefused; once connected,
// the connection is made again by itself until Close.
func DialHost(ctx context.Context, cred wire.Credential, o HostOptions) (plane.Host, error) {
	if o.Timeout <= 0 {
		o.Timeout = link.DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Timeout: o.Timeout, Vhost: wire.AMQPControlVhost, Address: o.Address, Logger: o.Logger})
	if err != nil {
		return nil, loginErr(fmt.Errorf("connect as the host: %w", err))
	}
	return &host{conn: conn, user: cred.User(), publishers: amqpconn.NewPool(conn.OpenPublisher), timeout: o.Timeout, last: map[string]plane.Declared{}}, nil
}

// Close closes the connection.
func (h *host) Close() error {
	return h.conn.Close(time.Now().Add(h.timeout), h.publishers.Close)
}

// Newest reads what node.<node> holds (the newest declaration the
// controller put: the queue keeps one) and gives it back at once: a
// classic queue of one drops the message given back if a newer one came
// meanwhile, and keeps it otherwise, so every reader, a host restarted
// too, reads the newest. A queue read empty (between a purge and the next
// put) gives the last one read again. The body and signature are returned
// unchecked: checking them is the host's.
func (h *host) Newest(ctx context.Context, node string) (plane.Declared, error) {
	q := wire.NodeQueue(node)
	ch, err := h.conn.Channel(ctx)
	if err != nil {
		return plane.Declared{}, fmt.Errorf("read %s: %w", q, err)
	}
	defer func() { _ = ch.Close() }()
	var d amqp.Delivery
	var ok bool
	err = amqpconn.Bounded(ctx, ch, func() error {
		var err error
		d, ok, err = ch.Get(q, false)
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return plane.Declared{}, fmt.Errorf("read %s: %w: %w", q, plane.ErrMissing, err)
		}
		return plane.Declared{}, fmt.Errorf("read %s: %w", q, amqpconn.Refused(err))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		last, have := h.last[node]
		if !have {
			return plane.Declared{}, fmt.Errorf("read %s: %w", q, plane.ErrNoDeclaration)
		}
		return last, nil
	}
	sig, _ := d.Headers[wire.HeaderSignature].(string)
	got := plane.Declared{Body: d.Body, Signature: sig, Where: "queue " + q}
	if err := d.Nack(false, true); err != nil {
		return plane.Declared{}, fmt.Errorf("read %s: %w", q, amqpconn.MapClosed(err))
	}
	h.last[node] = got
	return got, nil
}

// Report puts the report in its node's report queue, its id as
// message-id, persistent, and returns once the broker confirmed it. A
// full queue refuses it (a negative confirm): it stays the caller's to
// send again.
func (h *host) Report(ctx context.Context, node, id string, body []byte) error {
	return h.publish(ctx, wire.NodeReport(node), true, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, UserId: h.user, Body: body,
	})
}

// Alive puts a heartbeat in the node's heartbeat queue (which keeps the
// newest, briefly).
func (h *host) Alive(ctx context.Context, node string, body []byte) error {
	return h.publish(ctx, wire.NodeAlive(node), false, amqp.Publishing{
		ContentType: "application/json", UserId: h.user, Body: body,
	})
}

func (h *host) publish(ctx context.Context, key string, mandatory bool, msg amqp.Publishing) error {
	return sendControl(ctx, h.publishers, h.timeout, key, mandatory, msg)
}

// sendControl publishes msg into the control plane through
// wire.ExchangeControl with key (the wire subject) and waits for the
// broker's confirm, within timeout when ctx has no deadline. A mandatory
// publish no queue takes is plane.ErrMissing naming the key.
func sendControl(ctx context.Context, publishers *amqpconn.Pool[*amqpconn.Publisher], timeout time.Duration, key string, mandatory bool, msg amqp.Publishing) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := amqpconn.Publish(ctx, publishers, key, wire.ExchangeControl, key, mandatory, msg)
	if errors.Is(err, amqpconn.ErrUnroutable) {
		return fmt.Errorf("%w: no queue takes %s: %w", plane.ErrMissing, key, err)
	}
	return noExchange(wire.ExchangeControl, err)
}

// noExchange names the exchange a publish went to when the broker closed
// the channel because it is not there (404): plane.ErrMissing, which the
// controller's assertion makes again; nothing here declares it.
func noExchange(exchange string, err error) error {
	if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
		return fmt.Errorf("%w: exchange %s of vhost %s (the controller declares it): %w", plane.ErrMissing, exchangeName(exchange), wire.AMQPControlVhost, err)
	}
	return err
}

// Credentials asks the controller for the node's modules' credentials: a
// request on the node's key, with a correlation id, and the answer read
// from the node's answer queue (wire.CredentialsQueue), which the
// controller alone writes and this host alone reads; answers to requests
// given up on are passed over.
func (h *host) Credentials(ctx context.Context, node string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	key, queue := wire.NodeCredentials(node), wire.CredentialsQueue(node)
	ch, err := h.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", key, err)
	}
	defer func() { _ = ch.Close() }()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var answers <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		var err error
		answers, err = ch.Consume(queue, "", false, false, false, false, nil)
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("ask %s: %w: queue %s: %w", key, plane.ErrMissing, queue, err)
		}
		return nil, fmt.Errorf("ask %s: %w", key, amqpconn.Refused(err))
	}
	id := wire.NewID()
	if err := h.publish(ctx, key, true, amqp.Publishing{CorrelationId: id, MessageId: id, UserId: h.user}); err != nil {
		return nil, fmt.Errorf("ask %s: %w", key, err)
	}
	for {
		select {
		case d, ok := <-answers:
			if !ok {
				return nil, fmt.Errorf("ask %s: %w", key, amqpconn.Refused(amqpconn.CloseCause(closed)))
			}
			_ = d.Ack(false)
			if d.CorrelationId == id {
				return d.Body, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("ask %s: %w: %w", key, link.ErrTimeout, ctx.Err())
		}
	}
}
