package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
)

// How the controller tells a quiet node: heartbeats come every few seconds
// (the host's DefaultHeartbeat); a node not heard for QuietAfter, by a
// controller connected to the bus all that time, has gone quiet. The
// controller writes what it heard every livenessEvery; a record older
// than staleAfter says the controller is not looking.
const (
	QuietAfter    = 20 * time.Second
	livenessEvery = 5 * time.Second
	staleAfter    = 3 * livenessEvery
)

// Liveness is what the controller last wrote of the nodes' heartbeats.
type Liveness struct {
	// At is when it was written; Connected whether the controller's bus
	// connection was up then, and since when without a break.
	At             time.Time `json:"at"`
	Connected      bool      `json:"connected"`
	ConnectedSince time.Time `json:"connected_since,omitzero"`
	// Heard is each node's last heartbeat, by the controller's clock.
	Heard map[string]time.Time `json:"heard"`
}

// Quiet says whether node has gone quiet at now, and if that cannot be
// told, why. A controller whose own connection is down, or was until
// lately, calls nobody quiet: it did not hear because it could not (a
// control plane that once took its own disconnection for a dead fleet
// deleted every host).
func (l Liveness) Quiet(node string, now time.Time) (quiet bool, unknown string) {
	switch {
	case l.At.IsZero():
		return false, "the controller has not listened yet"
	case now.Sub(l.At) > staleAfter:
		return false, fmt.Sprintf("the controller has not listened since %s", l.At.UTC().Format(time.RFC3339))
	case !l.Connected:
		return false, fmt.Sprintf("the controller's bus connection was down at %s", l.At.UTC().Format(time.RFC3339))
	case now.Sub(l.ConnectedSince) < QuietAfter:
		return false, fmt.Sprintf("the controller is connected only since %s", l.ConnectedSince.UTC().Format(time.RFC3339))
	}
	heard, ok := l.Heard[node]
	return !ok || now.Sub(heard) > QuietAfter, ""
}

// ListenLiveness hears every node's heartbeat on nc (the control account's
// connection) and writes what it heard, with the connection's state, to
// st every livenessEvery, until stop.
func ListenLiveness(ctx context.Context, bus plane.HeartbeatFeed, st Store, log *slog.Logger) (stop func(), err error) {
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
		tick := time.NewTicker(livenessEvery)
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
			l := Liveness{At: now, Connected: connected, ConnectedSince: since, Heard: maps.Clone(heard)}
			mu.Unlock()
			uctx, ucancel := context.WithTimeout(wctx, saveTimeout)
			if err := st.Update(uctx, func(tx Tx) error { return tx.PutLiveness(uctx, l) }); err != nil && wctx.Err() == nil {
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
