package observe

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe/amqproutes"
)

// The artifacts on AMQP (docs/decisions/0011), read from outside: the
// stream wire.QueueArtifacts as the controller reads it, every chunk's
// newest copy, as ARTIFACTS keeps the newest message of each subject.

// streamQuiet is how long a reading of the stream waits for one more
// message before it takes what it read for all there is: a stream read
// has no end marker.
const streamQuiet = time.Second

// StoredArtifact reads the artifact of digest, size bytes long, from the
// artifacts' stream as c (the controller: no one else reads it), each
// chunk's newest copy, and returns it once the whole hashes to digest.
func (c *AMQPClient) StoredArtifact(ctx context.Context, digest string, size int64) ([]byte, error) {
	ch, err := c.Channel()
	if err != nil {
		return nil, fmt.Errorf("read %s: open a channel: %w", wire.QueueArtifacts, err)
	}
	defer ch.Close()
	if err := ch.Qos(64, 0, false); err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.QueueArtifacts, err)
	}
	deliveries, err := ch.Consume(wire.QueueArtifacts, "", false, false, false, false, amqp.Table{wire.ArgStreamOffset: wire.StreamFromFirst})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.QueueArtifacts, err)
	}
	chunks := make([][]byte, wire.ChunksOf(size))
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return nil, fmt.Errorf("read %s: the channel closed", wire.QueueArtifacts)
			}
			_ = d.Ack(false)
			if got, n, err := wire.ParseArtifactChunk(d.RoutingKey); err == nil && got == digest && n < len(chunks) {
				chunks[n] = d.Body
			}
			continue
		case <-time.After(streamQuiet):
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", wire.QueueArtifacts, ctx.Err())
		}
		break
	}
	for n, chunk := range chunks {
		if chunk == nil {
			return nil, fmt.Errorf("%w: %s holds no chunk %d of %s", artifact.ErrMissing, wire.QueueArtifacts, n, digest)
		}
	}
	return artifact.Join(digest, size, chunks)
}

// PutChunk puts data as chunk n of the artifact of digest into the
// artifacts' stream as c (the builder: the one principal that may write
// a chunk's key), persistent, mandatory and confirmed: the chunk the
// controller copies from then on.
func (c *AMQPClient) PutChunk(ctx context.Context, digest string, n int, data []byte) error {
	key := wire.ArtifactChunk(digest, n)
	o, err := amqproutes.Publish(ctx, c.Connection, wire.ExchangeControl, key, true, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: wire.NewID(), UserId: wire.BuilderUser, Body: data,
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if o != amqproutes.Taken {
		return errors.New("put " + key + ": expected it taken, the broker answered " + o.String())
	}
	return nil
}
