package amqpplane

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// DialSource connects as a source repository (cred is its credential)
// in the control plane's virtual host, where it may write its own
// announcement's key on wire.ExchangeControl and read nothing
// (docs/decisions/0009).
func DialSource(ctx context.Context, cred wire.Credential, o HostOptions) (plane.Source, error) {
	conn, publishers, o, err := dialControl(ctx, cred, o)
	if err != nil {
		return nil, fmt.Errorf("connect as %s: %w", cred.User(), err)
	}
	return &source{conn: conn, user: cred.User(), publishers: publishers, timeout: o.Timeout}, nil
}

// source is plane.Source on one connection as a repository.
type source struct {
	conn       *amqpconn.Conn
	user       string
	publishers *amqpconn.Pool[*amqpconn.Publisher]
	timeout    time.Duration
}

// Announce puts the announcement in the repository's queue through
// wire.ExchangeControl with its subject as key, id as message-id,
// persistent, and returns once the broker confirmed it.
func (s *source) Announce(ctx context.Context, repo, id string, body []byte) error {
	return sendControl(ctx, s.publishers, s.timeout, wire.SourceChanged(repo), true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, DeliveryMode: amqp.Persistent, MessageId: id, UserId: s.user, Body: body,
	})
}

// ServeFetches: how a builder fetches from a repository on AMQP is still
// open (docs/decisions/0009); the repositories answer on NATS alone.
func (s *source) ServeFetches(context.Context, string, func(plane.Fetch)) (func(), error) {
	return nil, fmt.Errorf("%w: serving a repository's fetches on AMQP", plane.ErrUnsupported)
}

func (s *source) Close() error {
	return s.conn.Close(time.Now().Add(s.timeout), s.publishers.Close)
}
