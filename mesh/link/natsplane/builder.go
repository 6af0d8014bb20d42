package natsplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// serverAckWait is the server's AckWait for a consumer that sets none.
const serverAckWait = 30 * time.Second

const (
	// nextWait bounds a pull for a request when the caller's context
	// sets no deadline.
	nextWait = 5 * time.Second
	// flushWait bounds the flush of a request given back.
	flushWait = 2 * time.Second
)

// DialBuilder connects as the builder (cred is its credential). Once
// connected, the connection reconnects by itself, without end, until
// Close: a builder outlives a restart of the bus. What the server reports
// after the fact (a permissions violation) is logged on the options'
// logger unless opts name an error handler of their own.
func DialBuilder(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Builder, error) {
	nc, err := dialReporting(ctx, cred, opts)
	if err != nil {
		return nil, loginError(fmt.Errorf("connect as the builder: %w", err))
	}
	return NewBuilder(nc)
}

// dialReporting dials cred, reconnecting without end, its asynchronous
// errors logged on opts' logger (the caller's own handler, if any, is
// applied after and wins).
func dialReporting(ctx context.Context, cred wire.Credential, opts []link.Option) (*nats.Conn, error) {
	log := link.CommonOf(opts...).Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = append([]link.Option{
		link.WithNATSOptions(nats.MaxReconnects(-1)),
		link.WithErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// A permissions violation is reported only here.
			log.Warn("the bus reports", "err", err)
		}),
	}, opts...)
	return link.Dial(ctx, cred, opts...)
}

// NewBuilder is the builder's side on nc, a connection dialled with the
// builder's credential, which it owns from now on.
func NewBuilder(nc *nats.Conn) (plane.Builder, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &builder{nc: nc, js: js, closed: make(chan struct{})}, nil
}

// builder is plane.Builder on one connection as the builder.
type builder struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	cons jetstream.Consumer // bound by the first NextBuild that finds it
	beat time.Duration      // how often a request in hand is said in progress
}

// NextBuild binds the builders' consumer (sending only CONSUMER.INFO, the
// one JetStream API subject besides MSG.NEXT the builder is granted; never
// creating it) and takes the next request.
func (b *builder) NextBuild(ctx context.Context) (plane.BuildMsg, error) {
	if b.nc.IsClosed() {
		return nil, fmt.Errorf("take a build: %w", link.ErrClosed)
	}
	cons, beat, err := b.bind(ctx)
	if err != nil || cons == nil {
		return nil, err
	}
	// The pull is not cut short when ctx ends: a request the server hands
	// over in that instant would be dropped unread, and wait out the
	// AckWait before another builder saw it. It lasts until ctx's
	// deadline (the caller's poll) at most, and a request that arrives
	// after ctx ended is given back at once.
	wait := nextWait
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Millisecond)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(wait))
	if err == nil && ctx.Err() != nil {
		if err := msg.Nak(); err != nil {
			return nil, fmt.Errorf("give back a build taken as the builder stopped: %w", err)
		}
		if err := b.nc.FlushTimeout(flushWait); err != nil {
			return nil, fmt.Errorf("give back a build taken as the builder stopped: %w", err)
		}
		return nil, nil
	}
	switch {
	case err == nil:
	case ctx.Err() != nil, errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, jetstream.ErrNoMessages):
		return nil, nil
	case errors.Is(err, nats.ErrConnectionClosed):
		return nil, fmt.Errorf("take a build: %w: %w", link.ErrClosed, err)
	default:
		return nil, fmt.Errorf("take a build: %w", err)
	}
	m := &buildMsg{msg: msg, nc: b.nc, done: make(chan struct{})}
	m.beats.Go(func() { m.sayInProgress(beat, b.closed) })
	return m, nil
}

// bind is the builders' consumer and the in-progress period of its ack
// wait; a nil consumer when ctx ended first.
func (b *builder) bind(ctx context.Context) (jetstream.Consumer, time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cons != nil {
		return b.cons, b.beat, nil
	}
	cons, err := b.js.Consumer(ctx, wire.StreamBuilds, wire.BuildsConsumer)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, 0, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, 0, fmt.Errorf("%w: the builders' consumer %s on %s (the controller creates it): %w", plane.ErrMissing, wire.BuildsConsumer, wire.StreamBuilds, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
		// A refused API request is dropped by the server, so a grant
		// missing looks like this too.
		return nil, 0, fmt.Errorf("no answer binding the builders' consumer %s on %s (is JetStream up, and is the builder granted its CONSUMER.INFO?): %w", wire.BuildsConsumer, wire.StreamBuilds, err)
	default:
		return nil, 0, fmt.Errorf("bind %s on %s: %w", wire.BuildsConsumer, wire.StreamBuilds, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = serverAckWait
	}
	b.cons, b.beat = cons, ackWait/3
	return b.cons, b.beat, nil
}

// FetchRevision asks the repository by a core request on its fetch
// subject; the answer comes to the builder's inbox.
func (b *builder) FetchRevision(ctx context.Context, repo string, request []byte) ([]byte, error) {
	subject := wire.SourceFetch(repo)
	reply, err := b.nc.RequestWithContext(ctx, subject, request)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%w: nobody answers on %s", plane.ErrNoAnswerer, subject)
	}
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	return reply.Data, nil
}

// PutArtifact stores the artifact's chunks in ARTIFACTS (artifact.Put).
func (b *builder) PutArtifact(ctx context.Context, data []byte) (string, int, error) {
	return artifact.Put(ctx, b.js, data)
}

// Built publishes the outcome into CONTROL, id as its Nats-Msg-Id: the
// same outcome sent twice within the stream's duplicate window is stored
// once.
func (b *builder) Built(ctx context.Context, id string, body []byte) error {
	return publishControl(ctx, b.js, wire.SubjectBuilt, id, body)
}

// publishControl publishes body on subject into CONTROL with message id
// id and checks that CONTROL is what acknowledged it: a reply subject is
// not checked by the server, so an acknowledgement from any other stream
// is not ours.
func publishControl(ctx context.Context, js jetstream.JetStream, subject, id string, body []byte) error {
	ack, err := js.Publish(ctx, subject, body, jetstream.WithMsgID(id), jetstream.WithExpectStream(wire.StreamControl))
	if err != nil {
		return fmt.Errorf("publish on %s: %w", subject, err)
	}
	if ack.Stream != wire.StreamControl {
		return fmt.Errorf("publish on %s: acknowledged by stream %q, not %s", subject, ack.Stream, wire.StreamControl)
	}
	return nil
}

// Close stops saying anything is in progress and closes the connection:
// a request in hand comes again to another builder after the ack wait.
func (b *builder) Close() error {
	b.once.Do(func() {
		close(b.closed)
		b.nc.Close()
	})
	return nil
}

// buildMsg is a request of BUILDS in a builder's hands.
type buildMsg struct {
	msg   jetstream.Msg
	nc    *nats.Conn
	done  chan struct{}
	once  sync.Once
	beats sync.WaitGroup
}

// sayInProgress tells the server every period that the request is still
// being worked on, so that it is not delivered to another builder while
// this one builds, until it is settled or the builder closed.
func (m *buildMsg) sayInProgress(period time.Duration, closed <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-closed:
			return
		case <-t.C:
			// A failure is the connection's, heard by NextBuild; the
			// request comes again after the ack wait at worst.
			_ = m.msg.InProgress()
		}
	}
}

// settled stops the in-progress beats before the request is settled.
func (m *buildMsg) settled() {
	m.once.Do(func() { close(m.done) })
	m.beats.Wait()
}

func (m *buildMsg) ID() string   { return m.msg.Headers().Get(jetstream.MsgIDHeader) }
func (m *buildMsg) Data() []byte { return m.msg.Data() }

func (m *buildMsg) Position() uint64 {
	if meta, err := m.msg.Metadata(); err == nil {
		return meta.Sequence.Stream
	}
	return 0
}

func (m *buildMsg) Attempt() int {
	if meta, err := m.msg.Metadata(); err == nil {
		return int(meta.NumDelivered)
	}
	return 1
}

// Ack acknowledges the request and waits for the server to confirm it.
func (m *buildMsg) Ack(ctx context.Context) error {
	m.settled()
	return m.msg.DoubleAck(ctx)
}

// Hold naks the request, to come again after delay, and flushes, so that
// a builder about to close its connection has said so first.
func (m *buildMsg) Hold(delay time.Duration) error {
	m.settled()
	var err error
	if delay > 0 {
		err = m.msg.NakWithDelay(delay)
	} else {
		err = m.msg.Nak()
	}
	if err == nil {
		err = m.nc.FlushTimeout(2 * time.Second)
	}
	return err
}

func (m *buildMsg) Term(reason string) error {
	m.settled()
	return m.msg.TermWithReason(reason)
}
