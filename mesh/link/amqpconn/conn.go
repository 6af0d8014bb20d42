// Package amqpconn is what every AMQP speaker of the mesh shares (the
// modules' binding, package amqplink, and the control plane's,
// amqpplane): one connection as a credential, over TLS with the
// certificate pinned, dialled again with backoff when the broker or the
// network drops it; channels opened within a deadline; publishes
// confirmed; consumers that drain; deliveries given back after a delay;
// and the broker's refusals mapped to package link's sentinel errors.
//
// amqp091-go's own recovery is opt-in and experimental, and a call on a
// broker frozen right after the dial never returns (RABBITMQ-NOTES.md):
// so every call here is bounded by a deadline of our own, and the
// reconnection is ours.
package amqpconn

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

// Options tune Dial.
type Options struct {
	// Timeout bounds a dial whose context has no deadline, and each
	// reconnection attempt.
	Timeout time.Duration
	// Vhost is the virtual host when the credential's URL names none.
	Vhost string
	// Address is host:port to dial instead of the URL's, the certificate
	// still checked against the URL's host name (a test reaching the
	// broker through a mapped port).
	Address string
	// Logger receives the connection's own lines (never nil after Dial).
	Logger *slog.Logger
	// Name is the name the broker shows the connection by (AMQP's
	// client-provided connection_name); "" names it after the
	// credential's user.
	Name string
	// Resume is called, on a goroutine of the reconnection's, once a
	// connection lost was made again: consume and serve again on it.
	Resume func()
}

// Conn is one principal's AMQP connection. When the broker or the network
// drops it, it dials again with backoff until Close, then calls Resume.
// A call made while it is away waits for it within the call's context.
type Conn struct {
	o    Options
	dial func(context.Context) (*amqp.Connection, error)

	// done is closed by Close; it ends a reconnect loop.
	done chan struct{}

	// state guards the connection: conn is the open one, nil while
	// reconnecting; up is closed while conn is set, and replaced when it
	// is lost; closing is set by Close.
	state   sync.Mutex
	conn    *amqp.Connection
	up      chan struct{}
	closing bool
}

// Dial connects as cred over amqps://, with the certificate's fingerprint
// pinned and its name checked (link.PinnedTLS), to the virtual host the
// URL's path names (o.Vhost when it names none).
//
// A scoped credential over plain amqp:// is refused: it pins a
// certificate, and a connection without TLS has none to check, so
// accepting one would be the silent downgrade design 19 forbids.
func Dial(ctx context.Context, cred wire.Credential, o Options) (*Conn, error) {
	if cred.Bootstrap {
		return nil, link.ErrBootstrap
	}
	// The URL alone is checked here: whether the credential carries what
	// its principal needs is its holder's business (a host's minted
	// beside a mesh on NATS has no declaration key), and whether its
	// user may log in the broker's. No error quotes the URL whole:
	// url.Parse's own does, password included.
	u, err := url.Parse(cred.URL)
	if err != nil {
		return nil, fmt.Errorf("dial amqp: %w: field url: %s does not read", wire.ErrBadCredential, wire.RedactURL(cred.URL))
	}
	switch u.Scheme {
	case "amqps":
	case "amqp":
		return nil, fmt.Errorf("dial amqp: %w: field url: %s: scheme amqp is plain TCP and the credential pins a certificate; want amqps", wire.ErrBadCredential, wire.RedactURL(cred.URL))
	default:
		return nil, fmt.Errorf("dial amqp: %w: field url: %s: scheme %q is not AMQP over TLS; want amqps", wire.ErrBadCredential, wire.RedactURL(cred.URL), u.Scheme)
	}
	if o.Timeout <= 0 {
		o.Timeout = link.DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{o: o, done: make(chan struct{})}
	c.dial = func(ctx context.Context) (*amqp.Connection, error) { return dialConn(ctx, cred, o, u) }
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.connected(conn)
	return c, nil
}

// dialConn makes one connection as cred, whose URL is u, within ctx and
// within o.Timeout: a handshake the broker stalls (a login it refuses
// under load answered late, a broker frozen right after accepting) fails
// this attempt, and the caller's retry makes the next, rather than
// holding a caller with a long context for all of it.
func dialConn(ctx context.Context, cred wire.Credential, o Options, u *url.URL) (*amqp.Connection, error) {
	deadline := time.Now().Add(o.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	props := amqp.NewConnectionProperties()
	name := o.Name
	if name == "" {
		name = cred.User()
	}
	props.SetClientConnectionName(name)
	config := amqp.Config{
		TLSClientConfig: link.PinnedTLS(cred.Fingerprint, cred.Host()),
		Properties:      props,
		// The deadline covers TCP, TLS and the AMQP handshake; amqp091
		// clears it once the connection is open.
		Dial: func(network, addr string) (net.Conn, error) {
			if o.Address != "" {
				addr = o.Address
			}
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
		config.Vhost = o.Vhost
	}
	conn, err := amqp.DialConfig(cred.URL, config)
	if err != nil {
		if errors.Is(err, link.ErrFingerprint) {
			return nil, fmt.Errorf("dial amqp at %s: %w: %w", u.Host, link.ErrFingerprint, err)
		}
		if BrokerCode(err) == amqp.AccessRefused {
			return nil, fmt.Errorf("dial amqp at %s as %s: %w: %w", u.Host, cred.User(), ErrLoginRefused, err)
		}
		return nil, fmt.Errorf("dial amqp at %s as %s: %w", u.Host, cred.User(), err)
	}
	return conn, nil
}

// ErrLoginRefused is wrapped when the broker refused the credential's
// login (403 at connection: no such user, a wrong password, or no
// permission on the virtual host).
var ErrLoginRefused = errors.New("the broker refused the login")

// connected makes conn the connection and watches it; c.state is held
// (or c is not yet shared).
func (c *Conn) connected(conn *amqp.Connection) {
	// up is open since the loss (lost made it), or nil at Dial; closing it
	// wakes every call waiting for the connection.
	if c.up == nil {
		c.up = make(chan struct{})
	}
	close(c.up)
	c.conn = conn
	go c.watch(conn, conn.NotifyClose(make(chan *amqp.Error, 1)))
}

// watch waits for conn's end; one the broker or the network caused, not
// Close, is a loss to reconnect from.
func (c *Conn) watch(conn *amqp.Connection, closed chan *amqp.Error) {
	if e, ok := <-closed; ok && e != nil {
		c.lost(conn, e)
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
func (c *Conn) lost(conn *amqp.Connection, cause error) {
	c.state.Lock()
	if c.closing || c.conn != conn {
		c.state.Unlock()
		return
	}
	c.conn, c.up = nil, make(chan struct{})
	c.state.Unlock()
	c.o.Logger.Warn("connection to the bus lost; reconnecting", "err", cause)
	go c.reconnect()
}

// reconnect dials until a connection is made or Close, then resumes.
func (c *Conn) reconnect() {
	pause := firstPause
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
		conn, err := c.dial(ctx)
		cancel()
		if err == nil {
			c.state.Lock()
			if c.closing {
				c.state.Unlock()
				_ = conn.Close()
				return
			}
			c.connected(conn)
			c.state.Unlock()
			c.o.Logger.Info("reconnected to the bus", "attempts", attempt)
			if c.o.Resume != nil {
				c.o.Resume()
			}
			return
		}
		c.o.Logger.Warn("reconnect failed; trying again", "attempt", attempt, "err", err, "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-c.done:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
	}
}

// Close stops reconnecting, runs before (stop the consumers, close the
// pools: the connection is still open for them), then closes the
// connection by deadline. A second Close does nothing.
func (c *Conn) Close(deadline time.Time, before func()) error {
	c.state.Lock()
	if c.closing {
		c.state.Unlock()
		return nil
	}
	c.closing = true
	close(c.done)
	conn := c.conn
	c.state.Unlock()
	if before != nil {
		before()
	}
	if conn != nil {
		if err := conn.CloseDeadline(deadline.Add(time.Second)); err != nil && !errors.Is(err, amqp.ErrClosed) {
			return fmt.Errorf("close connection: %w", err)
		}
	}
	return nil
}

// CheckOpen refuses new work once Close has begun.
func (c *Conn) CheckOpen() error {
	c.state.Lock()
	defer c.state.Unlock()
	if c.closing {
		return link.ErrClosed
	}
	return nil
}

// Connected says whether the connection is up right now.
func (c *Conn) Connected() bool {
	c.state.Lock()
	defer c.state.Unlock()
	return c.conn != nil && !c.conn.IsClosed()
}

// Connection is the open connection, waiting within ctx while it is
// being made again.
func (c *Conn) Connection(ctx context.Context) (*amqp.Connection, error) {
	for {
		c.state.Lock()
		closing, conn, up := c.closing, c.conn, c.up
		c.state.Unlock()
		switch {
		case closing:
			return nil, link.ErrClosed
		case conn != nil && conn.IsClosed():
			// Ended before watch heard of it.
			c.lost(conn, amqp.ErrClosed)
			continue
		case conn != nil:
			return conn, nil
		}
		select {
		case <-up:
		case <-c.done:
			return nil, link.ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the bus is reconnecting: %w", link.ErrTimeout, ctx.Err())
		}
	}
}

// Channel opens a channel within ctx. A channel that opens after ctx
// ended is closed, never leaked.
func (c *Conn) Channel(ctx context.Context) (*Channel, error) {
	type result struct {
		ch  *amqp.Channel
		err error
	}
	conn, err := c.Connection(ctx)
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
			return nil, fmt.Errorf("open channel: %w", MapClosed(r.err))
		}
		return &Channel{Channel: r.ch, c: c, conn: conn}, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.ch != nil {
				_ = (&Channel{Channel: r.ch, c: c, conn: conn}).Close()
			}
		}()
		return nil, fmt.Errorf("open channel: %w: %w", link.ErrTimeout, ctx.Err())
	}
}

// Logger is the connection's logger.
func (c *Conn) Logger() *slog.Logger { return c.o.Logger }
