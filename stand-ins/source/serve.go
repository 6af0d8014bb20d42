package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// serveQueue is the queue group the repository's answerers share, so that
// two of them running answer each fetch once.
const serveQueue = "source"

// serve answers fetches of repo's revisions from r until ctx ends. Each
// answer waits delay first, without holding up the others.
func serve(ctx context.Context, nc *nats.Conn, repo string, r repository, delay time.Duration, log *slog.Logger) error {
	var answers inflight
	defer answers.stop()
	subject := wire.SourceFetch(repo)
	sub, err := nc.QueueSubscribe(subject, serveQueue, func(m *nats.Msg) {
		answers.do(func() { answer(ctx, m, r, delay, log) })
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The server refuses a subscription asynchronously; by the flush's
	// answer it has said so.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	log.Info("repository serving", "repo", repo, "dir", r.dir, "subject", subject, "delay", delay.String())
	<-ctx.Done()
	log.Info("repository stopping", "repo", repo)
	return nil
}

// answer answers one fetch: the revision's content, or why there is none.
func answer(ctx context.Context, m *nats.Msg, r repository, delay time.Duration, log *slog.Logger) {
	// Only a caller's inbox, the builder's: a fetch whose reply names
	// anything else would have the repository write there (decision 0001:
	// a responder answers only a caller's inbox).
	if err := wire.CheckBuilderReply(m.Reply); err != nil {
		log.Warn("fetch not answered", "subject", m.Subject, "err", err)
		return
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	req, err := wire.ParseFetchRequest(m.Data)
	var ans wire.FetchAnswer
	switch {
	case err != nil:
		ans = wire.FetchAnswer{Error: "fetch refused: " + err.Error()}
	default:
		ans = wire.FetchAnswer{Module: req.Module, Revision: req.Revision}
		ans.Content, err = r.read(req.Module, req.Revision)
		if err != nil {
			ans.Content, ans.Error = nil, err.Error()
		}
	}
	if err := m.Respond(wire.Marshal(ans)); err != nil {
		log.Warn("answer a fetch", "module", ans.Module, "revision", ans.Revision, "err", err)
		return
	}
	log.Info("fetch answered", "module", ans.Module, "revision", ans.Revision, "bytes", len(ans.Content), "error", ans.Error)
}

// inflight runs answers each in its own goroutine, so that a delayed
// answer holds up no other, and waits for them when serving stops; an
// answer asked for after that is not started.
type inflight struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func (f *inflight) do(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.wg.Go(fn)
}

func (f *inflight) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.wg.Wait()
}
