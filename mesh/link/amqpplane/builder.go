package amqpplane

import (
	"context"
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

// DialBuilder connects as the builder (cred is its credential) in the
// control plane's virtual host, where it may read builds and write its
// outcomes' key on wire.ExchangeControl (docs/decisions/0009). Once
// connected, the connection is made again by itself until Close.
func DialBuilder(ctx context.Context, cred wire.Credential, o HostOptions) (plane.Builder, error) {
	conn, publishers, o, err := dialControl(ctx, cred, o)
	if err != nil {
		return nil, fmt.Errorf("connect as the builder: %w", err)
	}
	return &builder{conn: conn, user: cred.User(), publishers: publishers, timeout: o.Timeout, log: o.Logger}, nil
}

// dialControl connects as cred in the control plane's virtual host, with
// o's defaults filled in, and a pool of confirming publishers on it.
func dialControl(ctx context.Context, cred wire.Credential, o HostOptions) (*amqpconn.Conn, *amqpconn.Pool[*amqpconn.Publisher], HostOptions, error) {
	if o.Timeout <= 0 {
		o.Timeout = link.DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Timeout: o.Timeout, Vhost: wire.AMQPControlVhost, Address: o.Address, Logger: o.Logger})
	if err != nil {
		return nil, nil, o, loginErr(err)
	}
	return conn, amqpconn.NewPool(conn.OpenPublisher), o, nil
}

// builder is plane.Builder on one connection as the builder: builds
// consumed on a channel of its own with a prefetch of one, so that a
// request taken is this builder's until it settles it or its channel
// closes, and no second one comes meanwhile.
type builder struct {
	conn       *amqpconn.Conn
	user       string
	publishers *amqpconn.Pool[*amqpconn.Publisher]
	timeout    time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	consumer *buildsConsumer // nil until the first NextBuild, and after its channel closed
}

// buildsConsumer is builds consumed on one channel.
type buildsConsumer struct {
	ch         *amqpconn.Channel
	closed     chan *amqp.Error
	deliveries <-chan amqp.Delivery
	requeues   *amqpconn.Requeues
}

// NextBuild takes the next request of builds, consuming the queue first
// when it is not consumed (the first call, or the channel lost with the
// connection).
func (b *builder) NextBuild(ctx context.Context) (plane.BuildMsg, error) {
	if err := b.conn.CheckOpen(); err != nil {
		return nil, fmt.Errorf("take a build: %w", err)
	}
	c, err := b.consume(ctx)
	if err != nil || c == nil {
		return nil, err
	}
	select {
	case d, ok := <-c.deliveries:
		if !ok {
			b.drop(c)
			if err := b.conn.CheckOpen(); err != nil {
				return nil, fmt.Errorf("take a build: %w", err)
			}
			return nil, fmt.Errorf("take a build: the channel of %s closed: %w", wire.QueueBuilds, amqpconn.Refused(amqpconn.CloseCause(c.closed)))
		}
		return buildMsg{d: d, requeues: c.requeues}, nil
	case <-ctx.Done():
		return nil, nil
	}
}

// consume is the consumer of builds, made if there is none; nil when ctx
// ended first.
func (b *builder) consume(ctx context.Context) (*buildsConsumer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consumer != nil {
		return b.consumer, nil
	}
	ch, err := b.conn.Channel(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("consume %s: %w", wire.QueueBuilds, err)
	}
	c := &buildsConsumer{ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1)), requeues: amqpconn.NewRequeues(b.log)}
	err = amqpconn.Bounded(ctx, ch, func() error {
		// One build at a time: the one in hand holds the channel's only
		// place, a held one included.
		if err := ch.Qos(1, 0, false); err != nil {
			return err
		}
		var err error
		c.deliveries, err = ch.Consume(wire.QueueBuilds, "", false, false, false, false, nil)
		return err
	})
	if err != nil {
		_ = ch.Close()
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: queue %s (the controller declares it): %w", plane.ErrMissing, wire.QueueBuilds, err)
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("consume %s: %w", wire.QueueBuilds, amqpconn.Refused(err))
	}
	b.consumer = c
	return c, nil
}

// drop forgets c, whose channel closed, so that the next NextBuild
// consumes again.
func (b *builder) drop(c *buildsConsumer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consumer == c {
		b.consumer = nil
	}
}

// FetchRevision puts the request into repository repo's fetch queue
// through wire.ExchangeControl, with a correlation id, and reads the
// answer from wire.QueueFetched, which this builder alone reads: only an
// answer with repo's key (which only that repository may write) and the
// request's correlation id is taken; others, of fetches given up on, are
// passed over. A fetch queue nobody consumes is plane.ErrNoAnswerer at
// once, as a request nobody subscribes to is on NATS.
func (b *builder) FetchRevision(ctx context.Context, repo string, request []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	key, queue := wire.SourceFetch(repo), wire.SourceFetchQueue(repo)
	ch, err := b.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", repo, err)
	}
	defer func() { _ = ch.Close() }()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var answers <-chan amqp.Delivery
	var waiting amqp.Queue
	err = amqpconn.Bounded(ctx, ch, func() error {
		var err error
		// A passive declare needs no permission, and says how many
		// consume the repository's queue.
		if waiting, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
			return err
		}
		answers, err = ch.Consume(wire.QueueFetched, "", false, false, false, false, nil)
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("fetch from %s: %w: %w", repo, plane.ErrMissing, err)
		}
		return nil, fmt.Errorf("fetch from %s: %w", repo, amqpconn.Refused(err))
	}
	if waiting.Consumers == 0 {
		return nil, fmt.Errorf("fetch from %s: %w: nothing consumes %s", repo, plane.ErrNoAnswerer, queue)
	}
	id := wire.NewID()
	err = sendControl(ctx, b.publishers, b.timeout, key, true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, CorrelationId: id, MessageId: id, UserId: b.user, Body: request,
	})
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", repo, err)
	}
	for {
		select {
		case d, ok := <-answers:
			if !ok {
				return nil, fmt.Errorf("fetch from %s: %w", repo, amqpconn.Refused(amqpconn.CloseCause(closed)))
			}
			_ = d.Ack(false)
			if d.CorrelationId == id && d.RoutingKey == wire.SourceFetched(repo) {
				return d.Body, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("fetch from %s: %w: %w", repo, link.ErrTimeout, ctx.Err())
		}
	}
}

// Built puts the outcome in control.built through wire.ExchangeControl
// with its subject as key, id as message-id, persistent, and returns once
// the broker confirmed it.
func (b *builder) Built(ctx context.Context, id string, body []byte) error {
	return sendControl(ctx, b.publishers, b.timeout, wire.SubjectBuilt, true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, DeliveryMode: amqp.Persistent, MessageId: id, UserId: b.user, Body: body,
	})
}

// Close gives back at once what waits out a hold, and closes the
// connection: the broker requeues the request in hand, for another
// builder.
func (b *builder) Close() error {
	return b.conn.Close(time.Now().Add(b.timeout), func() {
		b.mu.Lock()
		c := b.consumer
		b.consumer = nil
		b.mu.Unlock()
		if c != nil {
			c.requeues.Flush()
			_ = c.ch.Close()
		}
		b.publishers.Close()
	})
}

// buildMsg is a delivery of builds in a builder's hands.
type buildMsg struct {
	d        amqp.Delivery
	requeues *amqpconn.Requeues
}

func (m buildMsg) ID() string       { return m.d.MessageId }
func (m buildMsg) Position() uint64 { return 0 }
func (m buildMsg) Attempt() int     { return attempt(m.d) }
func (m buildMsg) Data() []byte     { return m.d.Body }

// Ack acknowledges the request; AMQP confirms no acknowledgement.
func (m buildMsg) Ack(context.Context) error { return amqpconn.MapClosed(m.d.Ack(false)) }

// Hold keeps the request unsettled for delay and then requeues it (AMQP
// has no delayed requeue): meanwhile it holds the channel's one place.
func (m buildMsg) Hold(delay time.Duration) error { return m.requeues.After(m.d, delay) }

// Term drops the request: builds has no dead-letter exchange.
func (m buildMsg) Term(string) error { return amqpconn.MapClosed(m.d.Reject(false)) }
