// Package amqpbus is the SDK's AMQP binding (design 19 on the bus the
// mesh has today, RabbitMQ: design 25 §1, spelled in mesh/wire/amqp.go).
// Events are published to the topic exchange mesh.events and consumed
// from the module's quorum queue <node>.<module>.events; tools are served
// from the shared queue serve.<module>.<tool> and called through mesh.rpc
// with RabbitMQ's direct reply-to. It implements transport.Transport,
// declares nothing on the broker (the mesh's definitions did: package
// amqpdefs), and decides nothing about an envelope: package sdk does.
//
// Every operation runs on a channel of its own kind, used by one
// operation at a time: RabbitMQ answers a refused operation (403
// ACCESS_REFUSED, 404 NOT_FOUND) by closing the channel it came on, so a
// channel per operation is what lets a refusal be reported to the call
// that caused it, and no other.
package amqpbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/bus"
	"github.com/meshbus/mesh/mesh/sdk/internal/transport"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bus is one module's AMQP connection.
type Bus struct {
	cfg        transport.Config
	node, name string
	conn       *amqp.Connection
	log        *slog.Logger

	// Idle channels, each used by one call at a time.
	publishers *pool[*publisher]
	callers    *pool[*caller]

	mu       sync.Mutex
	closing  bool
	consumer *consumer
	servers  []*consumer
}

var _ transport.Transport = (*Bus)(nil)

// Dial connects as cfg.Credential over amqps://, with the certificate's
// fingerprint pinned and its name checked (bus.PinnedTLS), to the virtual
// host the URL's path names (wire.AMQPVhost when it names none).
//
// A scoped credential over plain amqp:// is refused: a scoped credential
// pins a certificate, and a connection without TLS has none to check, so
// accepting one would be the silent downgrade design 19 forbids ("it does
// not skip verification"). A test broker is given a certificate like any
// other.
func Dial(ctx context.Context, cfg transport.Config) (transport.Transport, error) {
	cred := cfg.Credential
	if cred.Bootstrap {
		return nil, bus.ErrBootstrap
	}
	u, err := url.Parse(cred.URL)
	if err != nil {
		return nil, fmt.Errorf("dial amqp: %w: field url: %w", wire.ErrBadCredential, err)
	}
	if u.Scheme != "amqps" {
		return nil, fmt.Errorf("dial amqp: %w: field url: scheme %q is plain TCP and the credential pins a certificate; want amqps", wire.ErrBadCredential, u.Scheme)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = bus.DefaultTimeout
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(cfg.Timeout)
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(cred.User())
	config := amqp.Config{
		TLSClientConfig: bus.PinnedTLS(cred.Fingerprint, cred.Host()),
		Properties:      props,
		// The deadline covers TCP, TLS and the AMQP handshake; amqp091
		// clears it once the connection is open.
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := conn.SetDeadline(deadline); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	if u.Path == "" {
		config.Vhost = wire.AMQPVhost
	}
	conn, err := amqp.DialConfig(cred.URL, config)
	if err != nil {
		if errors.Is(err, bus.ErrFingerprint) {
			return nil, fmt.Errorf("dial amqp at %s: %w: %w", u.Host, transport.ErrFingerprint, err)
		}
		return nil, fmt.Errorf("dial amqp at %s as %s: %w", u.Host, cred.User(), err)
	}
	b := &Bus{cfg: cfg, node: cred.Node, name: cred.Module, conn: conn, log: cfg.Logger}
	b.publishers = newPool(b.openPublisher)
	b.callers = newPool(b.openCaller)
	go b.watch(conn.NotifyClose(make(chan *amqp.Error, 1)))
	return b, nil
}

// watch logs the connection's end when the broker or the network ended it.
func (b *Bus) watch(closed chan *amqp.Error) {
	if e, ok := <-closed; ok && e != nil {
		b.log.Error("connection to the bus lost", "err", e)
	}
}

// Close stops consuming (the deliveries already fetched are still handed
// to the SDK and settled), lets the tool calls in flight be answered,
// then closes the connection. It waits at most the configured timeout
// for the consumers.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	stops := append([]*consumer{b.consumer}, b.servers...)
	b.mu.Unlock()
	deadline := time.Now().Add(b.cfg.Timeout)
	var errs []error
	for _, c := range stops {
		if c != nil {
			if err := c.stop(deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.publishers.close()
	b.callers.close()
	if err := b.conn.CloseDeadline(deadline.Add(time.Second)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		errs = append(errs, fmt.Errorf("close connection: %w", err))
	}
	return errors.Join(errs...)
}

// checkOpen refuses a new consumer once Close has begun.
func (b *Bus) checkOpen() error {
	if b.closing || b.conn.IsClosed() {
		return transport.ErrClosed
	}
	return nil
}

// openChannel opens a channel within ctx. A channel that opens after ctx
// ended is closed, never leaked.
func (b *Bus) openChannel(ctx context.Context) (*amqp.Channel, error) {
	type result struct {
		ch  *amqp.Channel
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := b.conn.Channel()
		done <- result{ch, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("open channel: %w", mapClosed(r.err))
		}
		return r.ch, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.ch != nil {
				_ = r.ch.Close()
			}
		}()
		return nil, fmt.Errorf("open channel: %w: %w", transport.ErrTimeout, ctx.Err())
	}
}

// bounded runs op, a channel method that takes no context, and gives up
// when ctx ends, closing ch so that op ends too.
func bounded(ctx context.Context, ch *amqp.Channel, op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() { _ = ch.Close() }()
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
}

// brokerCode is the reply code of the broker's error in err (the one that
// closed a channel), or 0.
func brokerCode(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) && e != amqp.ErrClosed {
		return e.Code
	}
	return 0
}

// refused maps what closed a channel during an operation: 403 is the
// broker refusing what the account has no grant for.
func refused(err error) error {
	if brokerCode(err) == wire.AMQPAccessRefused {
		return fmt.Errorf("%w: %w", transport.ErrDenied, err)
	}
	return mapClosed(err)
}

// sendError maps a publish that could not be sent: the context ending
// first is ErrTimeout, like every wait of a call.
func sendError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, err)
	}
	return refused(err)
}

// mapClosed turns amqp091's closed-channel error into ErrClosed.
func mapClosed(err error) error {
	if errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("%w: %w", transport.ErrClosed, err)
	}
	return err
}

// closeCause is what closed a channel, once it is closed: the broker's
// error, or ErrClosed for a close of ours or of the connection.
func closeCause(closed <-chan *amqp.Error) error {
	select {
	case e, ok := <-closed:
		if ok && e != nil {
			return e
		}
	default:
	}
	return amqp.ErrClosed
}
