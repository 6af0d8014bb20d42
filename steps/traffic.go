package steps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness/hostctr"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/stand-ins/traffic/ledger"
)

// The cutover's traffic (stand-ins/traffic): the ticker emits a
// sequence-numbered event every 50 ms and serves a tool, the tally on the
// other node consumes those events and calls that tool every 100 ms, each
// keeping a ledger in its working directory, which these steps copy out
// of the hosts' containers and read together.

// trafficSlack is how long after a node was heard on NATS its modules may
// still be starting there: the host reports before they have connected.
const trafficSlack = 10 * time.Second

func (s *scenario) bindTraffic(sc *godog.ScenarioContext) {
	sc.Step(`^every event the ticker emitted throughout the cutover was consumed by the tally, none lost$`, s.everyTickConsumed)
	sc.Step(`^the tally's calls of the ticker's tool failed only while the nodes switched, and are answered again$`, s.callsFailedOnlyInTheSwitch)
}

// traffic reads the ledgers as they are now.
func (s *scenario) traffic(ctx context.Context) (ledger.Traffic, error) {
	read := func(module, file string) ([]byte, error) {
		node, err := s.nodeOf(module)
		if err != nil {
			return nil, err
		}
		m, err := s.r.cluster.Member(node)
		if err != nil {
			return nil, err
		}
		data, err := m.ReadFile(ctx, path.Join(host.State{Dir: hostctr.StateDir}.ModuleHome(module), file))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // nothing yet
		}
		return data, err
	}
	var out [3][]byte
	for i, f := range []struct{ module, file string }{{ledger.Ticker, ledger.EmittedFile}, {ledger.Tally, ledger.ReceivedFile}, {ledger.Tally, ledger.CallsFile}} {
		data, err := read(f.module, f.file)
		if err != nil {
			return ledger.Traffic{}, err
		}
		out[i] = data
	}
	emitted, err := ledger.ReadEntries(out[0])
	if err != nil {
		return ledger.Traffic{}, fmt.Errorf("the ticker's ledger: %w", err)
	}
	received, err := ledger.ReadEntries(out[1])
	if err != nil {
		return ledger.Traffic{}, fmt.Errorf("the tally's ledger of events: %w", err)
	}
	calls, err := ledger.ReadCalls(out[2])
	if err != nil {
		return ledger.Traffic{}, fmt.Errorf("the tally's ledger of calls: %w", err)
	}
	return ledger.Summarize(emitted, received, calls), nil
}

// nodeOf is the node the description places module on.
func (s *scenario) nodeOf(module string) (string, error) {
	r, err := s.cluster()
	if err != nil {
		return "", err
	}
	for _, n := range r.mesh.Nodes {
		if slices.Contains(n.Modules, module) {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("the description places no module %s on a node: raise a mesh from testdata/cutover.yaml", module)
}

// everyTickConsumed: the ticker emitted before the switch was committed
// (on AMQP) and after the cutover was done (on NATS), and within a
// minute every event it emitted up to then was received by the tally.
func (s *scenario) everyTickConsumed(ctx context.Context) error {
	c := s.cut.record
	if c.Committed.IsZero() || c.Ended.IsZero() {
		return fmt.Errorf("expected a cutover switched and ended to read the traffic against, the record says %+v", c)
	}
	var t ledger.Traffic
	err := eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		var err error
		if t, err = s.traffic(ctx); err != nil {
			return err
		}
		if !t.FirstEmitted.Before(c.Committed) || !t.LastEmitted.After(c.Ended) {
			return fmt.Errorf("expected the ticker to have emitted from before the switch (%s) to after the cutover ended (%s), it emitted %d events from %s to %s",
				stamp(c.Committed), stamp(c.Ended), t.Emitted, stamp(t.FirstEmitted), stamp(t.LastEmitted))
		}
		if len(t.Missing) > 0 {
			return fmt.Errorf("expected every one of the ticker's %d events received by the tally, %d are not (the first: %d)", t.Emitted, len(t.Missing), t.Missing[0])
		}
		return nil
	})
	if err != nil {
		return err
	}
	beds.Logf(ctx, "the ticker emitted %d events, the tally received each (%d deliveries again, absorbed by deduplication); the longest the ticker went without a confirmed emit: %s, from %s",
		t.Emitted, t.Duplicated, t.EmitSilence.Round(time.Millisecond), stamp(t.EmitSilenceFrom))
	beds.Measure(ctx, "traffic: the ticker's longest time without a confirmed emit", t.EmitSilence)
	return nil
}

// callsFailedOnlyInTheSwitch: every call of the ticker's tool since it
// was first answered (before the cutover began) that failed failed once
// the switch was committed and before both nodes had been
// heard on NATS (and their modules started there: trafficSlack), and a
// call was answered after the cutover ended.
func (s *scenario) callsFailedOnlyInTheSwitch(ctx context.Context) error {
	c := s.cut.record
	if c.Committed.IsZero() || c.Ended.IsZero() {
		return fmt.Errorf("expected a cutover switched and ended to read the calls against, the record says %+v", c)
	}
	var switched time.Time
	for _, n := range c.Nodes {
		if n.Switched.After(switched) {
			switched = n.Switched
		}
	}
	var t ledger.Traffic
	err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		var err error
		if t, err = s.traffic(ctx); err != nil {
			return err
		}
		if !t.Answered.After(c.Ended) {
			return fmt.Errorf("expected a call of the ticker's tool answered after the cutover ended (%s), the last answered was at %s", stamp(c.Ended), stamp(t.Answered))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The tally may start calling before the ticker, on the other node,
	// serves: those calls are the mesh starting, not the cutover. The tool
	// must have answered before the cutover began, or they would hide it.
	if t.FirstAnswered.IsZero() || !t.FirstAnswered.Before(c.Begun) {
		return fmt.Errorf("expected the ticker's tool answered before the cutover began (%s), it was first answered at %s", stamp(c.Begun), stamp(t.FirstAnswered))
	}
	if t.Failed > 0 && (t.FirstFailed.Before(c.Committed) || t.LastFailed.After(switched.Add(trafficSlack))) {
		return fmt.Errorf("expected the tally's calls to fail only from the switch's commit (%s) to %s after the last node was heard on NATS (%s), %d of %d failed from %s to %s (the last: %s)",
			stamp(c.Committed), trafficSlack, stamp(switched), t.Failed, t.Calls, stamp(t.FirstFailed), stamp(t.LastFailed), t.Why)
	}
	beds.Logf(ctx, "the tally called the ticker's tool %d times once it first answered (%d before), %d failed (from %s to %s; the last: %s); the longest it went without an answer: %s",
		t.Calls, t.Unserved, t.Failed, stamp(t.FirstFailed), stamp(t.LastFailed), t.Why, t.CallSilence.Round(time.Millisecond))
	beds.Measure(ctx, "traffic: the tally's longest time without an answer from the ticker's tool", t.CallSilence)
	return nil
}

// stamp is t to the millisecond, or "never".
func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("15:04:05.000")
}
