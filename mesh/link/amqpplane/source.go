package amqpplane

import (
	"context"
	"fmt"
	"log/slog"
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
	return &source{conn: conn, user: cred.User(), publishers: publishers, timeout: o.Timeout, log: o.Logger}, nil
}

// source is plane.Source on one connection as a repository.
type source struct {
	conn       *amqpconn.Conn
	user       string
	publishers *amqpconn.Pool[*amqpconn.Publisher]
	timeout    time.Duration
	log        *slog.Logger
}

// Announce puts the announcement in the repository's queue through
// wire.ExchangeControl with its subject as key, id as message-id,
// persistent, and returns once the broker confirmed it.
func (s *source) Announce(ctx context.Context, repo, id string, body []byte) error {
	return sendControl(ctx, s.publishers, s.timeout, wire.SourceChanged(repo), true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, DeliveryMode: amqp.Persistent, MessageId: id, UserId: s.user, Body: body,
	})
}

// ServeFetches consumes repository repo's fetch queue and hands serve
// each fetch the builder put there (the broker checked its user-id; a
// fetch from anyone else is passed over). The answer goes with repo's key
// into wire.QueueFetched, which the builder alone reads, whatever
// reply_to the fetch named. Two servers of one repository share the
// queue: each fetch is handed to one.
func (s *source) ServeFetches(ctx context.Context, repo string, serve func(plane.Fetch)) (func(), error) {
	f := newFeed(s.conn, s.log, 1, []string{wire.SourceFetchQueue(repo)}, func(d amqp.Delivery, _ *amqpconn.Requeues) {
		// Settled first: a fetch is asked again, never kept.
		_ = d.Ack(false)
		if d.UserId != wire.BuilderUser {
			s.log.Warn("fetch not answered: not the builder's", "repo", repo, "user", d.UserId)
			return
		}
		serve(fetch{s: s, repo: repo, correlation: d.CorrelationId, data: d.Body})
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}

// fetch is a fetch read from a repository's queue.
type fetch struct {
	s                 *source
	repo, correlation string
	data              []byte
}

func (f fetch) Data() []byte { return f.data }

// Answer puts body into the builder's answer queue with the repository's
// key and the fetch's correlation id, and returns once confirmed.
func (f fetch) Answer(body []byte) error {
	return sendControl(context.Background(), f.s.publishers, f.s.timeout, wire.SourceFetched(f.repo), true, amqp.Publishing{
		ContentType: wire.ContentTypeJSON, CorrelationId: f.correlation, MessageId: wire.NewID(), UserId: f.s.user, Body: body,
	})
}

func (s *source) Close() error {
	return s.conn.Close(time.Now().Add(s.timeout), s.publishers.Close)
}
