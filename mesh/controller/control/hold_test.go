package control

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
)

// heldMsg records the delay it is held for.
type heldMsg struct {
	plane.ControlMsg
	attempt int
	held    time.Duration
}

func (m *heldMsg) Attempt() int                   { return m.attempt }
func (m *heldMsg) Hold(delay time.Duration) error { m.held = delay; return nil }

// TestAMessageHeldWhileTheStoreIsAwayWaitsByItsOwnDeliveries: the delay
// grows with the times the message itself came, from controlRetry to
// controlRetryMax, however many other messages were held meanwhile (each
// node's reports, every few seconds): a loop-wide delay had a claim that
// came twice wait 30 s once the store was back.
func TestAMessageHeldWhileTheStoreIsAwayWaitsByItsOwnDeliveries(t *testing.T) {
	l := &ControlLoop{log: slog.New(slog.DiscardHandler)}
	away := fmt.Errorf("update: %w", store.ErrStoreUnavailable)
	for range 20 {
		l.hold(&heldMsg{attempt: 7}, l.log, away) // others, held again and again
	}
	for attempt, want := range map[int]time.Duration{
		1: controlRetry, 2: 2 * controlRetry, 3: 4 * controlRetry, 5: 16 * controlRetry,
		6: controlRetryMax, 60: controlRetryMax,
	} {
		m := &heldMsg{attempt: attempt}
		l.hold(m, l.log, away)
		if m.held != want {
			t.Errorf("delivery %d held while the store is away: expected %s, got %s", attempt, want, m.held)
		}
	}
	m := &heldMsg{attempt: 9}
	l.hold(m, l.log, fmt.Errorf("a failure of the store's own"))
	if m.held != controlRetry {
		t.Errorf("a message the store refused: expected held %s, got %s", controlRetry, m.held)
	}
}
