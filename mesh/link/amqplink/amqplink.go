// Package amqplink is the modules' AMQP binding (design 19 on the bus the
// mesh has today, RabbitMQ: design 25 §1, spelled in mesh/wire/amqp.go).
// Events are published to the topic exchange mesh.events and consumed
// from the module's quorum queue <node>.<module>.events; tools are served
// from the shared queue serve.<module>.<tool> and called through mesh.rpc
// with RabbitMQ's direct reply-to. It implements link.Transport,
// declares nothing on the broker (the mesh's definitions did: package
// amqpdefs), and decides nothing about an envelope: package sdk does.
//
// A lost connection is dialled again with backoff until Close (see Bus).
//
// Every operation runs on a channel of its own kind, used by one
// operation at a time: RabbitMQ answers a refused operation (403
// ACCESS_REFUSED, 404 NOT_FOUND) by closing the channel it came on, so a
// channel per operation is what lets a refusal be reported to the call
// that caused it, and no other.
package amqplink

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

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bus is one module's AMQP connection. When the broker or the network
// drops it, the bus dials again with backoff until Close (reconnect), and
// then consumes its events queue and serves its tools again: a module on
// AMQP rides out a broker restart as one on NATS does (nats.go reconnects
// by itself). A call made while the bus is away waits for it within the
// call's context.
type Bus struct {
	cfg        link.Config
	node, name string
	log        *slog.Logger
	// dial makes a new connection as the credential (dialConn).
	dial func(context.Context) (*amqp.Connection, error)

	// Idle channels, each used by one call at a time.
	publishers *pool[*publisher]
	callers    *pool[*caller]

	// done is closed by Close; it ends a reconnect loop.
	done chan struct{}

	// state guards the connection: conn is the open one, nil while the
	// bus reconnects; up is closed while conn is set, and replaced when it
	// is lost; closing is set by Close.
	state   sync.Mutex
	conn    *amqp.Connection
	up      chan struct{}
	closing bool

	// mu guards the consumers and serialises Consume, Serve and resume,
	// which open channels (taking state) while they hold it.
	mu sync.Mutex
	// consuming says Consume was called: a new connection consumes again.
	consuming bool
	consumer  *consumer
	// served are the tools served, in order, each with its consumer.
	served []*served
}

// served is one tool served and the consumer of the connection in use.
type served struct {
	tool    string
	handler link.ToolFunc
	c       *consumer
}

var _ link.Transport = (*Bus)(nil)

// Dial connects as cfg.Credential over amqps://, with the certificate's
// fingerprint pinned and its name checked (link.PinnedTLS), to the virtual
// host the URL's path names (wire.AMQPVhost when it names none).
//
// A scoped credential over plain amqp:// is refused: a scoped credential
// pins a certificate, and a connection without TLS has none to check, so
// accepting one would be the silent downgrade design 19 forbids ("it does
// not skip verification"). A test broker is given a certificate like any
// other.
func Dial(ctx context.Context, cfg link.Config) (link.Transport, error) {
	cred := cfg.Credential
	if cred.Bootstrap {
		return nil, link.ErrBootstrap
	}
	u, err := url.Parse(cred.URL)
	if err != nil {
		return nil, fmt.Errorf("dial amqp: %w: field url: %w", wire.ErrBadCredential, err)
	}
	if u.Scheme != "amqps" {
		return nil, fmt.Errorf("dial amqp: %w: field url: scheme %q is plain TCP and the credential pins a certificate; want amqps", wire.ErrBadCredential, u.Scheme)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = link.DefaultTimeout
	}
	b := &Bus{cfg: cfg, node: cred.Node, name: cred.Module, log: cfg.Logger, done: make(chan struct{})}
	b.dial = func(ctx context.Context) (*amqp.Connection, error) { return dialConn(ctx, cfg, u) }
	conn, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	b.publishers = newPool(b.openPublisher)
	b.callers = newPool(b.openCaller)
	b.connected(conn)
	return b, nil
}

// dialConn makes one connection as cfg.Credential, whose URL is u, within
// ctx (or cfg.Timeout when ctx has no deadline).
func dialConn(ctx context.Context, cfg link.Config, u *url.URL) (*amqp.Connection, error) {
	cred := cfg.Credential
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(cfg.Timeout)
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(cred.User())
	config := amqp.Config{
		TLSClientConfig: link.PinnedTLS(cred.Fingerprint, cred.Host()),
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
		if errors.Is(err, link.ErrFingerprint) {
			return nil, fmt.Errorf("dial amqp at %s: %w: %w", u.Host, link.ErrFingerprint, err)
		}
		return nil, fmt.Errorf("dial amqp at %s as %s: %w", u.Host, cred.User(), err)
	}
	return conn, nil
}

// connected makes conn the bus's connection and watches it; b.state is held
// (or b is not yet shared).
func (b *Bus) connected(conn *amqp.Connection) {
	// up is open since the loss (lost made it), or nil at Dial; closing it
	// wakes every call waiting for the bus.
	if b.up == nil {
		b.up = make(chan struct{})
	}
	close(b.up)
	b.conn = conn
	go b.watch(conn, conn.NotifyClose(make(chan *amqp.Error, 1)))
}

// watch waits for conn's end; one the broker or the network caused, not
// Close, is a loss to reconnect from.
func (b *Bus) watch(conn *amqp.Connection, closed chan *amqp.Error) {
	if e, ok := <-closed; ok && e != nil {
		b.lost(conn, e)
	}
}

// Reconnection's pauses between attempts: doubled from the first up to
// the ceiling.
const (
	firstPause = 100 * time.Millisecond
	maxPause   = 5 * time.Second
)

// lost starts reconnecting after conn ended, once: only the connection in
// use can be lost, and not after Close.
func (b *Bus) lost(conn *amqp.Connection, cause error) {
	b.state.Lock()
	if b.closing || b.conn != conn {
		b.state.Unlock()
		return
	}
	b.conn, b.up = nil, make(chan struct{})
	b.state.Unlock()
	b.log.Warn("connection to the bus lost; reconnecting", "err", cause)
	go b.reconnect()
}

// reconnect dials until a connection is made or Close, then consumes and
// serves again on it.
func (b *Bus) reconnect() {
	pause := firstPause
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
		conn, err := b.dial(ctx)
		cancel()
		if err == nil {
			b.state.Lock()
			if b.closing {
				b.state.Unlock()
				_ = conn.Close()
				return
			}
			b.connected(conn)
			b.state.Unlock()
			b.log.Info("reconnected to the bus", "attempts", attempt)
			b.resume()
			return
		}
		b.log.Warn("reconnect failed; trying again", "attempt", attempt, "err", err, "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-b.done:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
	}
}

// resume consumes the events queue and serves every tool again on the new
// connection. The old events consumer is waited for first, since the SDK is
// handed deliveries by one goroutine at a time. What cannot be resumed is
// logged: the mesh no longer declares it, and a later Consume or Serve
// would be refused the same way.
func (b *Bus) resume() {
	b.mu.Lock()
	old := b.consumer
	b.mu.Unlock()
	if old != nil {
		<-old.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.checkOpen() != nil {
		return
	}
	if b.consuming {
		c, err := b.startConsumer(ctx)
		if err != nil {
			b.log.Error("events not consumed again after reconnecting", "err", err)
		} else {
			b.consumer = c
		}
	}
	for _, sv := range b.served {
		c, err := b.startServer(ctx, sv.tool, sv.handler)
		if err != nil {
			b.log.Error("tool not served again after reconnecting", "tool", sv.tool, "err", err)
			continue
		}
		sv.c = c
	}
}

// Close stops consuming (the deliveries already fetched are still handed
// to the SDK and settled), lets the tool calls in flight be answered,
// then closes the connection. It waits at most the configured timeout
// for the consumers. A reconnect in progress is abandoned.
func (b *Bus) Close() error {
	b.state.Lock()
	if b.closing {
		b.state.Unlock()
		return nil
	}
	b.closing = true
	close(b.done)
	conn := b.conn
	b.state.Unlock()
	// After any Consume, Serve or resume in progress: what they started is
	// stopped too.
	b.mu.Lock()
	stops := []*consumer{b.consumer}
	for _, sv := range b.served {
		stops = append(stops, sv.c)
	}
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
	if conn != nil {
		if err := conn.CloseDeadline(deadline.Add(time.Second)); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, fmt.Errorf("close connection: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkOpen refuses a new consumer once Close has begun.
func (b *Bus) checkOpen() error {
	b.state.Lock()
	defer b.state.Unlock()
	if b.closing {
		return link.ErrClosed
	}
	return nil
}

// connection is the open connection, waiting within ctx while the bus
// reconnects.
func (b *Bus) connection(ctx context.Context) (*amqp.Connection, error) {
	for {
		b.state.Lock()
		closing, conn, up := b.closing, b.conn, b.up
		b.state.Unlock()
		switch {
		case closing:
			return nil, link.ErrClosed
		case conn != nil && conn.IsClosed():
			// Ended before watch heard of it.
			b.lost(conn, amqp.ErrClosed)
			continue
		case conn != nil:
			return conn, nil
		}
		select {
		case <-up:
		case <-b.done:
			return nil, link.ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the bus is reconnecting: %w", link.ErrTimeout, ctx.Err())
		}
	}
}

// openChannel opens a channel within ctx. A channel that opens after ctx
// ended is closed, never leaked.
func (b *Bus) openChannel(ctx context.Context) (*amqp.Channel, error) {
	type result struct {
		ch  *amqp.Channel
		err error
	}
	conn, err := b.connection(ctx)
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	done := make(chan result, 1)
	go func() {
		ch, err := conn.Channel()
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
		return nil, fmt.Errorf("open channel: %w: %w", link.ErrTimeout, ctx.Err())
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
		return fmt.Errorf("%w: %w", link.ErrTimeout, ctx.Err())
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
		return fmt.Errorf("%w: %w", link.ErrDenied, err)
	}
	return mapClosed(err)
}

// sendError maps a publish that could not be sent: the context ending
// first is ErrTimeout, like every wait of a call.
func sendError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", link.ErrTimeout, err)
	}
	return refused(err)
}

// mapClosed turns amqp091's closed-channel error into ErrClosed.
func mapClosed(err error) error {
	if errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("%w: %w", link.ErrClosed, err)
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
