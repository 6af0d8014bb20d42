package status

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
)

// ListenLiveness hears every node's heartbeat on nc (the control account's
// connection) and writes what it heard, with the connection's state, to
// st every store.LivenessEvery, until stop.
func ListenLiveness(ctx context.Context, bus plane.HeartbeatFeed, st store.Store, log *slog.Logger) (stop func(), err error) {
	prev, err := st.Liveness(ctx)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	heard := maps.Clone(prev.Heard)
	if heard == nil {
		heard = map[string]time.Time{}
	}
	stopHearing, err := bus.Hear(ctx, func(node string, _ []byte) {
		mu.Lock()
		heard[node] = time.Now()
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(store.LivenessEvery)
		defer tick.Stop()
		var since time.Time
		for {
			now := time.Now()
			connected := bus.Connected()
			switch {
			case !connected:
				since = time.Time{}
			case since.IsZero():
				since = now
			}
			mu.Lock()
			l := store.Liveness{At: now, Connected: connected, ConnectedSince: since, Heard: maps.Clone(heard)}
			mu.Unlock()
			uctx, ucancel := context.WithTimeout(wctx, saveTimeout)
			if err := st.Update(uctx, func(tx store.Tx) error { return tx.PutLiveness(uctx, l) }); err != nil && wctx.Err() == nil {
				log.Warn("liveness not written", "err", err)
			}
			ucancel()
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		stopHearing()
	}, nil
}
