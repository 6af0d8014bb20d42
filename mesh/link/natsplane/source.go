package natsplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// DialSource connects as a source repository (cred is its credential),
// reconnecting without end once connected; what the server reports after
// the fact, and a fetch not answered, are logged on the options' logger.
func DialSource(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Source, error) {
	nc, err := dialReporting(ctx, cred, opts)
	if err != nil {
		return nil, loginError(fmt.Errorf("connect as %s: %w", cred.User(), err))
	}
	return NewSource(nc, link.CommonOf(opts...).Logger)
}

// NewSource is a repository's side on nc, a connection dialled with the
// repository's credential, which it owns from now on; log (nil: discard)
// hears of fetches refused.
func NewSource(nc *nats.Conn, log *slog.Logger) (plane.Source, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &source{nc: nc, js: js, log: log}, nil
}

// source is plane.Source on one connection as a repository.
type source struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
}

// Announce publishes the announcement into CONTROL through JetStream, id
// as its Nats-Msg-Id: repeated within CONTROL's duplicate window (a
// commit retried after its acknowledgement was lost), it is stored once.
func (s *source) Announce(ctx context.Context, repo, id string, body []byte) error {
	return publishControl(ctx, s.js, wire.SourceChanged(repo), id, body)
}

// ServeFetches subscribes the repository's fetch subject in the
// repositories' queue group. A fetch whose reply is not the builder's
// inbox is logged and not handed over: the repository would write there
// (decision 0001: a responder answers only a caller's inbox).
func (s *source) ServeFetches(_ context.Context, repo string, serve func(plane.Fetch)) (func(), error) {
	subject := wire.SourceFetch(repo)
	sub, err := s.nc.QueueSubscribe(subject, wire.SourceQueueGroup, func(m *nats.Msg) {
		if err := wire.CheckBuilderReply(m.Reply); err != nil {
			s.log.Warn("fetch not answered", "subject", m.Subject, "err", err)
			return
		}
		serve(fetch{m})
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	// The server refuses a subscription asynchronously; by the flush's
	// answer it has said so.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := s.nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w: %w", subject, link.ErrDenied, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

func (s *source) Close() error {
	s.nc.Close()
	return nil
}

// fetch is a fetch request on NATS, answered on its reply subject.
type fetch struct{ m *nats.Msg }

func (f fetch) Data() []byte { return f.m.Data }

func (f fetch) Answer(body []byte) error { return f.m.Respond(body) }
