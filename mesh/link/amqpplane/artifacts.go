package amqpplane

// The artifacts on AMQP (docs/decisions/0011). The builder puts each
// chunk into the stream wire.QueueArtifacts, which the controller alone
// reads. A host cannot be narrowed to its own artifacts' chunks in a
// queue every chunk goes to, so it asks the controller, which copies the
// chunks of an artifact the host's declaration names into the host's own
// queue (wire.ArtifactsQueue). The host trusts nothing it reads until the
// whole hashes to the digest it was told (artifact.Join).

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// CopyTimeout bounds one artifact's copy for a host, the wait for its
// chunks to reach the controller's index included.
const CopyTimeout = time.Minute

// artifactsPrefetch is how many chunks a reader of the stream, or of a
// host's queue, has in hand at once.
const artifactsPrefetch = 16

// PutArtifact puts data's chunks into the artifacts' stream through
// wire.ExchangeControl, each with its key (wire.ArtifactChunk), persistent
// and confirmed before the next. The same bytes put again are chunks the
// stream holds twice; the controller copies the newest of each, the same.
func (b *builder) PutArtifact(ctx context.Context, data []byte) (string, int, error) {
	digest, chunks, err := artifact.Split(data)
	if err != nil {
		return "", 0, fmt.Errorf("put artifact: %w", err)
	}
	for n, chunk := range chunks {
		err := sendControl(ctx, b.publishers, b.timeout, wire.ArtifactChunk(digest, n), true, amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: artifact.ChunkID(digest, n), UserId: b.user, Body: chunk,
		})
		if err != nil {
			return "", 0, fmt.Errorf("put artifact %s: chunk %d of %d: %w", digest, n, len(chunks), err)
		}
	}
	return digest, len(chunks), nil
}

// Artifact asks the controller for the artifact on the node's key and
// reads the chunks it copies into the node's queue, which this host alone
// reads; chunks of a request given up on are passed over. The whole is
// returned once its chunks add up to size and hash to digest. A refusal
// by the controller (not declared to this node, not in the stream) wraps
// artifact.ErrMissing with its reason.
func (h *host) Artifact(ctx context.Context, digest string, size int64) ([]byte, error) {
	node, ok := wire.HostNode(h.user)
	if !ok {
		return nil, fmt.Errorf("fetch artifact: %q is no node's host", h.user)
	}
	if err := wire.CheckDigest(digest); err != nil {
		return nil, fmt.Errorf("fetch artifact: %w", err)
	}
	if size <= 0 || size > wire.MaxArtifact {
		return nil, fmt.Errorf("fetch artifact %s: %w: %d bytes, want 1..%d", digest, artifact.ErrSize, size, wire.MaxArtifact)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CopyTimeout)
		defer cancel()
	}
	key, queue := wire.NodeArtifact(node), wire.ArtifactsQueue(node)
	ch, err := h.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch artifact %s: %w", digest, err)
	}
	defer func() { _ = ch.Close() }()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var copies <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		if err := ch.Qos(artifactsPrefetch, 0, false); err != nil {
			return err
		}
		var err error
		copies, err = ch.Consume(queue, "", false, false, false, false, nil)
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("fetch artifact %s: %w: queue %s: %w", digest, plane.ErrMissing, queue, err)
		}
		return nil, fmt.Errorf("fetch artifact %s: %w", digest, amqpconn.Refused(err))
	}
	id := wire.NewID()
	err = h.publish(ctx, key, true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, CorrelationId: id, MessageId: id, UserId: h.user,
		Body: wire.Marshal(wire.ArtifactRequest{Digest: digest, Size: size}),
	})
	if err != nil {
		return nil, fmt.Errorf("fetch artifact %s: ask %s: %w", digest, key, err)
	}
	chunks := make([][]byte, wire.ChunksOf(size))
	left := len(chunks)
	for left > 0 {
		select {
		case d, ok := <-copies:
			if !ok {
				return nil, fmt.Errorf("fetch artifact %s: %w", digest, amqpconn.Refused(amqpconn.CloseCause(closed)))
			}
			_ = d.Ack(false)
			if d.CorrelationId != id {
				continue
			}
			if why, ok := d.Headers[wire.HeaderArtifactRefused].(string); ok {
				return nil, fmt.Errorf("fetch artifact %s: %w: the controller refused: %s", digest, artifact.ErrMissing, why)
			}
			n, ok := headerInt(d.Headers[wire.HeaderArtifactChunk])
			if d.Headers[wire.HeaderArtifactDigest] != digest || !ok || n < 0 || n >= int64(len(chunks)) {
				return nil, fmt.Errorf("fetch artifact %s: a copy names artifact %v chunk %v, not one of this artifact's %d", digest, d.Headers[wire.HeaderArtifactDigest], d.Headers[wire.HeaderArtifactChunk], len(chunks))
			}
			if chunks[n] == nil {
				chunks[n] = d.Body
				left--
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("fetch artifact %s: %d of %d chunks copied: %w: %w", digest, len(chunks)-left, len(chunks), link.ErrTimeout, ctx.Err())
		}
	}
	data, err := artifact.Join(digest, size, chunks)
	if err != nil {
		return nil, fmt.Errorf("fetch artifact: %w", err)
	}
	return data, nil
}

// ServeArtifacts follows the artifacts' stream into an index (each
// chunk's newest offset), consumes every node's artifact-request queue,
// and copies the chunks of an artifact allowed says the node may have
// into that node's queue through the default exchange, tagged with the
// request's correlation id; a request refused is answered with the
// reason. The queue a request was read from vouches for the node (only
// its host may publish on its key); one whose user-id is not the node's
// host is not answered.
func (c *Controller) ServeArtifacts(ctx context.Context, allowed func(ctx context.Context, node, digest string) (int64, error)) (func(), error) {
	m, err := c.mesh()
	if err != nil {
		return nil, err
	}
	queues, nodes, err := perNode(m, wire.NodeArtifact)
	if err != nil {
		return nil, err
	}
	idx := &artifactIndex{conn: c.Control, log: c.log, chunks: map[string]map[int]int64{}, next: -1, changed: make(chan struct{}), stopped: make(chan struct{}), done: make(chan struct{})}
	if err := idx.start(ctx); err != nil {
		return nil, err
	}
	f := newFeed(c.Control, c.log, 1, queues, func(d amqp.Delivery, _ *amqpconn.Requeues) {
		node := nodes[d.ConsumerTag]
		// Settled first: a request is asked again, never kept.
		_ = d.Ack(false)
		if d.UserId != "" && d.UserId != wire.HostUser(node) {
			c.log.Warn("an artifact request as another user; not answered", "node", node, "user", d.UserId)
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CopyTimeout)
		defer cancel()
		if err := c.serveArtifact(cctx, idx, allowed, node, d); err != nil {
			c.log.Warn("artifact not copied", "node", node, "err", err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.Timeout)
			defer cancel()
			_ = c.toHost(rctx, node, amqp.Publishing{CorrelationId: d.CorrelationId, MessageId: wire.NewID(), Headers: amqp.Table{wire.HeaderArtifactRefused: err.Error()}})
		}
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		idx.stop()
		return nil, err
	}
	return func() { f.stop(); idx.stop() }, nil
}

// serveArtifact copies what d asks for into node's queue, or says why not.
func (c *Controller) serveArtifact(ctx context.Context, idx *artifactIndex, allowed func(context.Context, string, string) (int64, error), node string, d amqp.Delivery) error {
	req, err := wire.ParseArtifactRequest(d.Body)
	if err != nil {
		return err
	}
	size, err := allowed(ctx, node, req.Digest)
	if err != nil {
		return err
	}
	if size != req.Size {
		return fmt.Errorf("artifact %s is declared %d bytes, not %d", req.Digest, size, req.Size)
	}
	offsets, err := idx.wait(ctx, req.Digest, wire.ChunksOf(size))
	if err != nil {
		return err
	}
	return c.copyArtifact(ctx, node, req.Digest, offsets, d.CorrelationId)
}

// copyArtifact reads the stream from the lowest of offsets and puts each
// chunk found at one of them into node's queue, confirmed.
func (c *Controller) copyArtifact(ctx context.Context, node, digest string, offsets map[int64]int, correlation string) error {
	ch, err := c.Control.Channel(ctx)
	if err != nil {
		return fmt.Errorf("copy artifact %s: %w", digest, err)
	}
	defer func() { _ = ch.Close() }()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	from := slices.Min(slices.Collect(maps.Keys(offsets)))
	deliveries, err := consumeStream(ctx, ch, from)
	if err != nil {
		return fmt.Errorf("copy artifact %s: %w", digest, err)
	}
	for len(offsets) > 0 {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("copy artifact %s: %w", digest, amqpconn.Refused(amqpconn.CloseCause(closed)))
			}
			_ = d.Ack(false)
			off, _ := headerInt(d.Headers[wire.ArgStreamOffset])
			n, want := offsets[off]
			if !want {
				continue
			}
			err := c.toHost(ctx, node, amqp.Publishing{
				CorrelationId: correlation, MessageId: artifact.ChunkID(digest, n), Body: d.Body,
				Headers: amqp.Table{wire.HeaderArtifactDigest: digest, wire.HeaderArtifactChunk: int64(n)},
			})
			if err != nil {
				return fmt.Errorf("copy artifact %s: chunk %d: %w", digest, n, err)
			}
			delete(offsets, off)
		case <-ctx.Done():
			return fmt.Errorf("copy artifact %s: %d chunks not read from %s: %w", digest, len(offsets), wire.QueueArtifacts, ctx.Err())
		}
	}
	return nil
}

// toHost puts msg into node's artifact queue through the default
// exchange, confirmed.
func (c *Controller) toHost(ctx context.Context, node string, msg amqp.Publishing) error {
	err := c.publish(ctx, wire.ExchangeByQueueName, wire.ArtifactsQueue(node), msg)
	if err != nil {
		c.log.Warn("nothing put in the host's artifact queue", "node", node, "err", err)
	}
	return err
}

// consumeStream consumes the artifacts' stream on ch from offset from
// (-1: its first).
func consumeStream(ctx context.Context, ch *amqpconn.Channel, from int64) (<-chan amqp.Delivery, error) {
	var offset any = from
	if from < 0 {
		offset = wire.StreamFromFirst
	}
	var deliveries <-chan amqp.Delivery
	err := amqpconn.Bounded(ctx, ch, func() error {
		// A stream is read with a prefetch and acknowledgements, which
		// take nothing away: they let the broker hand on more.
		if err := ch.Qos(artifactsPrefetch, 0, false); err != nil {
			return err
		}
		var err error
		deliveries, err = ch.Consume(wire.QueueArtifacts, "", false, false, false, false, amqp.Table{wire.ArgStreamOffset: offset})
		return err
	})
	if err != nil {
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: queue %s: %w", plane.ErrMissing, wire.QueueArtifacts, err)
		}
		return nil, fmt.Errorf("consume %s: %w", wire.QueueArtifacts, amqpconn.Refused(err))
	}
	return deliveries, nil
}

// artifactIndex follows the artifacts' stream and keeps, for each chunk
// of each artifact, the offset of its newest copy: the one a host gets
// (ARTIFACTS on NATS keeps the newest message of each subject).
type artifactIndex struct {
	conn *amqpconn.Conn
	log  *slog.Logger

	mu      sync.Mutex
	chunks  map[string]map[int]int64
	next    int64         // the offset to follow from (-1: the first)
	changed chan struct{} // closed, and made anew, when chunks grows

	stopped, done chan struct{}
}

// start consumes the stream once (its absence is plane.ErrMissing) and
// follows it until stop, consuming again from where it was when the
// channel is lost.
func (x *artifactIndex) start(ctx context.Context) error {
	ch, deliveries, err := x.consume(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer close(x.done)
		for {
			x.follow(deliveries)
			_ = ch.Close()
			for {
				select {
				case <-x.stopped:
					return
				case <-time.After(time.Second):
				}
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ch, deliveries, err = x.consume(cctx)
				cancel()
				if err == nil {
					break
				}
				x.log.Warn("the artifacts' stream is not followed again yet", "err", err)
			}
		}
	}()
	return nil
}

func (x *artifactIndex) consume(ctx context.Context) (*amqpconn.Channel, <-chan amqp.Delivery, error) {
	ch, err := x.conn.Channel(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("consume %s: %w", wire.QueueArtifacts, err)
	}
	x.mu.Lock()
	from := x.next
	x.mu.Unlock()
	deliveries, err := consumeStream(ctx, ch, from)
	if err != nil {
		_ = ch.Close()
		return nil, nil, err
	}
	return ch, deliveries, nil
}

// follow indexes each delivery until the channel closes or stop.
func (x *artifactIndex) follow(deliveries <-chan amqp.Delivery) {
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			_ = d.Ack(false)
			x.add(d)
		case <-x.stopped:
			return
		}
	}
}

func (x *artifactIndex) add(d amqp.Delivery) {
	off, ok := headerInt(d.Headers[wire.ArgStreamOffset])
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.next = max(x.next, off+1)
	digest, n, err := wire.ParseArtifactChunk(d.RoutingKey)
	if err != nil {
		x.log.Warn("not an artifact's chunk; passed over", "key", d.RoutingKey, "err", err)
		return
	}
	if x.chunks[digest] == nil {
		x.chunks[digest] = map[int]int64{}
	}
	x.chunks[digest][n] = off
	close(x.changed)
	x.changed = make(chan struct{})
}

// wait returns the offsets of chunks 0..count-1 of digest (offset →
// chunk) once the index holds them all, or says which are missing when
// ctx ends first.
func (x *artifactIndex) wait(ctx context.Context, digest string, count int) (map[int64]int, error) {
	for {
		x.mu.Lock()
		have, changed := x.chunks[digest], x.changed
		offsets := map[int64]int{}
		for n := range count {
			if off, ok := have[n]; ok {
				offsets[off] = n
			}
		}
		x.mu.Unlock()
		if len(offsets) == count {
			return offsets, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of the %d chunks of artifact %s are in %s: %w", len(offsets), count, digest, wire.QueueArtifacts, plane.ErrMissing)
		}
	}
}

func (x *artifactIndex) stop() {
	close(x.stopped)
	select {
	case <-x.done:
	case <-time.After(10 * time.Second):
	}
}

// headerInt reads an integer header as amqp091-go decodes one.
func headerInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}
