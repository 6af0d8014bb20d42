package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// serve answers fetches of repo's revisions from r until ctx ends. Each
// answer waits delay first, without holding up the others. Which fetches
// are the builders' to answer is the bus's to say (plane.RevisionServer).
func serve(ctx context.Context, bus plane.RevisionServer, repo string, r repository, delay time.Duration, log *slog.Logger) error {
	var answers inflight
	defer answers.stop()
	stop, err := bus.ServeFetches(ctx, repo, func(f plane.Fetch) {
		answers.do(func() { answer(ctx, f, r, delay, log) })
	})
	if err != nil {
		return err
	}
	defer stop()
	log.Info("repository serving", "repo", repo, "dir", r.dir, "subject", wire.SourceFetch(repo), "delay", delay.String())
	<-ctx.Done()
	log.Info("repository stopping", "repo", repo)
	return nil
}

// answer answers one fetch: the revision's content, or why there is none.
func answer(ctx context.Context, f plane.Fetch, r repository, delay time.Duration, log *slog.Logger) {
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	req, err := wire.ParseFetchRequest(f.Data())
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
	if err := f.Answer(wire.Marshal(ans)); err != nil {
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
