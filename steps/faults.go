package steps

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
)

// Faults, for any bed: a sentence names a member (the bus, the controller)
// and what is done to it; the harness applies it, checks that it took
// effect, and undoes it on the sentence that says so or, failing that, at
// teardown. A member or fault the cluster does not have is refused with
// the ones it has.

func (s *scenario) bindFaults(sc *godog.ScenarioContext) {
	sc.Step(`^the bus's server process is killed with SIGKILL$`, s.theServerIsKilled)
	sc.Step(`^the ([a-z-]+) is killed with SIGKILL$`, func(ctx context.Context, m string) error { return s.inject(ctx, m, "kill") })
	sc.Step(`^the ([a-z-]+) is stopped$`, func(ctx context.Context, m string) error { return s.inject(ctx, m, "stop") })
	sc.Step(`^the ([a-z-]+) is paused$`, s.paused)
	sc.Step(`^the ([a-z-]+) is cut off from the ([a-z]+) network$`, func(ctx context.Context, m, net string) error {
		return s.inject(ctx, m, "partition from "+net)
	})
	sc.Step(`^the ([a-z-]+)'s link on the ([a-z]+) network loses (\d+)% of its packets$`, func(ctx context.Context, m, net string, p int) error {
		return s.inject(ctx, m, fmt.Sprintf("loss %d%% on %s", p, net))
	})
	sc.Step(`^the ([a-z-]+)'s link on the ([a-z]+) network is delayed by (\S+)$`, func(ctx context.Context, m, net, d string) error {
		return s.inject(ctx, m, "delay "+d+" on "+net)
	})
	sc.Step(`^the ([a-z-]+) is cut off from the ([a-z]+) network for (\d+) seconds$`, func(ctx context.Context, m, net string, secs int) error {
		return s.injectFor(ctx, m, "partition from "+net, time.Duration(secs)*time.Second)
	})
	sc.Step(`^the ([a-z-]+) is stopped for (\d+) seconds$`, func(ctx context.Context, m string, secs int) error {
		return s.injectFor(ctx, m, "stop", time.Duration(secs)*time.Second)
	})
	sc.Step(`^the ([a-z-]+) is (?:started|started again|resumed|healed)$`, s.undo)
	sc.Step(`^the ([a-z-]+) is stopped and started again$`, s.stoppedAndStarted)
}

// paused pauses member. On AMQP, what the broker hands a paused
// controller waits unsettled in its prefetch, where nothing but the
// broker's firehose sees it, neither a basic.get nor the queue's ready
// count: the scenario watches the control plane's firehose from before
// the pause.
func (s *scenario) paused(ctx context.Context, member string) error {
	if member == harness.MemberController && s.onAMQP() {
		if _, err := s.controlTrace(ctx); err != nil {
			return err
		}
	}
	return s.inject(ctx, member, "pause")
}

func (s *scenario) theServerIsKilled(ctx context.Context) error {
	return s.inject(ctx, harness.MemberBus, "kill-server")
}

// inject applies a fault. The cluster is tainted from here on: a member
// restarted has new processes, the bus perhaps a new port, and what the
// scenario did while it was down stays in the streams.
func (s *scenario) inject(ctx context.Context, member, fault string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	s.r.tainted = true
	took, err := r.cluster.Inject(ctx, member, fault)
	if err != nil {
		return err
	}
	s.faultAt = time.Now()
	beds.Logf(ctx, "%s on %s took effect in %s", fault, member, took.Round(time.Millisecond))
	return nil
}

// injectFor applies a fault for as long as the scenario says, and undoes
// it: the duration is the scenario's own statement of how long the member
// is broken, not a wait for something to happen.
func (s *scenario) injectFor(ctx context.Context, member, fault string, d time.Duration) error {
	if err := s.inject(ctx, member, fault); err != nil {
		return err
	}
	s.brokenFrom = time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	s.brokenUntil = time.Now()
	return s.undo(ctx, member)
}

// undo removes member's fault. Once the bus is back, the scenario's
// clients are dropped: they would go on redialling the port the bus had,
// and Docker may have given it another.
func (s *scenario) undo(ctx context.Context, member string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	fault := r.cluster.Fault(member)
	took, err := r.cluster.Undo(ctx, member)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "%s on %s undone, healthy in %s", fault, member, took.Round(time.Millisecond))
	if member == harness.AliasStore {
		s.storeBack = time.Now()
	}
	if member == harness.MemberBus {
		for user, c := range s.clients {
			c.Close()
			delete(s.clients, user)
		}
		if err := s.busAnswers(ctx, fault); err != nil {
			return err
		}
	}
	return nil
}

// busAnswers waits for the bus to serve the controller again, and records
// how long after the fault it did.
func (s *scenario) busAnswers(ctx context.Context, fault string) error {
	err := eventually(ctx, time.Minute, func(ctx context.Context) error {
		js, err := s.jetStream(ctx, wire.AccountControl)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("the bus did not answer again after %s was undone: %w", fault, err)
	}
	// For a fault that took the bus down, how long it was down: from the
	// fault taking effect to a client served again.
	if !s.faultAt.IsZero() && slices.Contains([]string{"kill", "kill-server", "stop", "pause"}, fault) {
		beds.Measure(ctx, "bus answering again after "+fault, time.Since(s.faultAt))
	}
	return nil
}

func (s *scenario) stoppedAndStarted(ctx context.Context, member string) error {
	if err := s.inject(ctx, member, "stop"); err != nil {
		return err
	}
	return s.undo(ctx, member)
}
