package steps

import (
	"context"
	"fmt"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
	"github.com/meshbus/mesh/observe/amqproutes"
)

// The build path of a mesh on AMQP, read from outside
// (docs/decisions/0011): the builds queue's own counts, the firehose's
// deliveries from it, the artifacts' stream as the controller reads it.

// storedArtifact is the artifact of digest as the bus keeps it: ARTIFACTS
// by direct gets, or the artifacts' stream, with the controller's
// credential.
func (s *scenario) storedArtifact(ctx context.Context, digest string, size int64) ([]byte, error) {
	if s.onAMQP() {
		c, err := s.controllerOnAMQP(ctx)
		if err != nil {
			return nil, err
		}
		return c.StoredArtifact(ctx, digest, size)
	}
	c, err := s.connect(ctx, wire.ControllerUser)
	if err != nil {
		return nil, err
	}
	return artifact.Fetch(ctx, c.Conn, digest, size)
}

// aBuildInHandOnAMQP: since the noting step, the broker's firehose saw
// builds hand a request over and no answer to a fetch put into the
// builder's queue: the builder holds the build, waiting for its revision
// (the repository answers after 2 s). The queue's own counts cannot say
// it: a quorum queue's counts lag by seconds.
func (s *scenario) aBuildInHandOnAMQP(ctx context.Context) error {
	t, err := s.noted()
	if err != nil {
		return err
	}
	handed, answered := t.Delivered(wire.QueueBuilds, s.bd.mark), len(t.PublishedInto(wire.QueueFetched, s.bd.mark))
	if handed < 1 || answered > 0 {
		return fmt.Errorf("expected a build handed over and its fetch not answered yet; since the mark %s handed %d, %d answers put in %s", wire.QueueBuilds, handed, answered, wire.QueueFetched)
	}
	return nil
}

// buildsHandedSinceNoted is how often the builders were handed a build
// since the noting step: BUILDS' consumer's delivered count, or on AMQP
// the firehose's deliveries from builds.
func (s *scenario) buildsHandedSinceNoted(ctx context.Context) (uint64, error) {
	if s.onAMQP() {
		t, err := s.noted()
		if err != nil {
			return 0, err
		}
		return uint64(t.Delivered(wire.QueueBuilds, s.bd.mark)), nil
	}
	p, err := s.buildsProgress(ctx)
	if err != nil {
		return 0, err
	}
	return p.Delivered - s.bd.delivered, nil
}

// overwriteChunkOnAMQP puts data as chunk 0 of digest with the builder's
// credential.
func (s *scenario) overwriteChunkOnAMQP(ctx context.Context, digest string, data []byte) error {
	b, err := s.broker()
	if err != nil {
		return err
	}
	cred, err := b.Credential(wire.BuilderUser)
	if err != nil {
		return err
	}
	addr, err := b.Address(ctx)
	if err != nil {
		return err
	}
	c, err := observe.DialAMQP(ctx, cred, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.PutChunk(ctx, digest, 0, data)
}

// announceOnAMQP announces revision of module as repository repo does,
// with its credential: on wire.ExchangeControl with its subject as key,
// the message id keyed with its password, persistent, confirmed.
func (s *scenario) announceOnAMQP(ctx context.Context, repo, module, revision string) error {
	b, err := s.broker()
	if err != nil {
		return err
	}
	cred, err := b.Credential(wire.SourceUser(repo))
	if err != nil {
		return err
	}
	u, err := url.Parse(cred.URL)
	if err != nil {
		return fmt.Errorf("%s's credential: %w", repo, err)
	}
	password, _ := u.User.Password()
	addr, err := b.Address(ctx)
	if err != nil {
		return err
	}
	c, err := observe.DialAMQP(ctx, cred, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	change := wire.SourceChange{Repo: repo, Module: module, Revision: revision, At: time.Now().UTC()}
	o, err := amqproutes.Publish(ctx, c.Connection, wire.ExchangeControl, wire.SourceChanged(repo), true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, DeliveryMode: amqp.Persistent, UserId: cred.User(), Body: wire.Marshal(change),
		MessageId: wire.SourceChangeMsgID(password, wire.BuildID(repo, module, revision)),
	})
	if err != nil {
		return err
	}
	if o != amqproutes.Taken {
		return fmt.Errorf("announce %s of %s as %s: expected it taken, the broker answered %v", revision, module, repo, o)
	}
	return nil
}
