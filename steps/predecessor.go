package steps

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/observe"
)

// The witness (issue 20): everything the predecessor's client could
// notice, snapshotted from outside before and after anything the mesh
// does on the broker they share.

// witnessGrowth bounds the wait for the predecessor's counts to grow past
// a note: it publishes 20 messages and makes 5 calls a second, so a
// second is plenty; a stopped client never grows.
const witnessGrowth = 15 * time.Second

func (s *scenario) bindPredecessor(sc *godog.ScenarioContext) {
	sc.Step(`^the witness notes what the predecessor can notice$`, s.theWitnessNotes)
	sc.Step(`^the predecessor noticed nothing since the witness's note$`, s.noticedNothingSinceTheNote)
	sc.Step(`^the predecessor noticed nothing since the broker was raised$`, s.noticedNothingSinceRaised)
	sc.Step(`^within (\d+) seconds status shows the compatibility broker "([^"]+)" with the predecessor's connections the broker lists, and not retirable$`, s.statusShowsTheCompatibilityBroker)
}

// statusShowsTheCompatibilityBroker compares the controller's count of
// the compatibility broker's clients with the broker's own list of the
// predecessor's connections, read by the witness.
func (s *scenario) statusShowsTheCompatibilityBroker(ctx context.Context, seconds int, module string) error {
	w, err := s.witness(ctx)
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		snap, err := w.Snapshot(ctx)
		if err != nil {
			return err
		}
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		c := st.Compat
		if c == nil {
			return fmt.Errorf("expected status to show the compatibility broker %s, it shows none", module)
		}
		if c.Module != module || c.Connected[w.User] != len(snap.Connections) || len(snap.Connections) == 0 || c.Retirable {
			return fmt.Errorf("expected the compatibility broker %s with %s connected %d time(s), as the broker lists, and not retirable; status shows %+v",
				module, w.User, len(snap.Connections), *c)
		}
		return nil
	})
}

// witness is the raised cluster's witness, and its first snapshot, taken
// the first time a scenario asks: the baseline of the whole bed.
func (s *scenario) witness(ctx context.Context) (observe.Witness, error) {
	r, err := s.cluster()
	if err != nil {
		return observe.Witness{}, err
	}
	pw, ok := r.cluster.(harness.PredecessorWatcher)
	if !ok {
		return observe.Witness{}, fmt.Errorf("this cluster has no predecessor to witness")
	}
	return pw.PredecessorWitness(ctx)
}

func (s *scenario) theWitnessNotes(ctx context.Context) error {
	w, err := s.witness(ctx)
	if err != nil {
		return err
	}
	snap, err := w.Snapshot(ctx)
	if err != nil {
		return err
	}
	s.witnessed = &snap
	return nil
}

func (s *scenario) noticedNothingSinceTheNote(ctx context.Context) error {
	if s.witnessed == nil {
		return fmt.Errorf("no witness's note was taken in this scenario")
	}
	return s.noticedNothingSince(ctx, *s.witnessed)
}

// noticedNothingSinceRaised compares with a snapshot of the predecessor
// as it was on its first connection: nothing lost, duplicated, timed out
// or refused, one connection, opened once by the broker, never closed.
func (s *scenario) noticedNothingSinceRaised(ctx context.Context) error {
	w, err := s.witness(ctx)
	if err != nil {
		return err
	}
	now, err := w.Snapshot(ctx)
	if err != nil {
		return err
	}
	first := now
	first.Counts = observe.FirstConnected(now.Counts)
	first.Opened, first.Closed = 1, 0
	if err := s.noticedNothingSince(ctx, first); err != nil {
		return err
	}
	c := now.Counts
	beds.Logf(ctx, "the predecessor since %s: sent %d, confirmed %d, received %d, lost %d, duplicated %d; calls %d, answered %d, timed out %d; connections %d, disconnects %d",
		c.Started.Format(time.RFC3339), c.Sent, c.Confirmed, c.Received, c.Lost, c.Duplicated, c.Calls, c.Answered, c.TimedOut, len(c.Connections), len(c.Disconnects))
	return nil
}

// noticedNothingSince waits until the predecessor's counts have grown
// past before and says what it noticed, if anything.
func (s *scenario) noticedNothingSince(ctx context.Context, before observe.PredecessorSnapshot) error {
	w, err := s.witness(ctx)
	if err != nil {
		return err
	}
	var noticed []string
	err = eventually(ctx, witnessGrowth, func(ctx context.Context) error {
		after, err := w.Snapshot(ctx)
		if err != nil {
			return err
		}
		if noticed = observe.Noticed(before, after); len(noticed) > 0 {
			return fmt.Errorf("it noticed")
		}
		return nil
	})
	if len(noticed) > 0 {
		return fmt.Errorf("expected the predecessor to notice nothing, it noticed:\n  %s", strings.Join(noticed, "\n  "))
	}
	return err
}
