// Package steps holds the step definitions of the beds: thin sentences
// that call the harness, which raises the cluster, and package observe,
// which looks at it from outside. A World lives for a whole run; each
// scenario gets its own state, made in InitScenario.
package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/cucumber/godog"
	"github.com/hashicorp/go-multierror"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/topology"
)

// Options configure the step definitions of a run.
type Options struct {
	// Root is the checkout images are built from; empty: found from the
	// working directory.
	Root string
	// FeaturesDir is where feature files and their testdata are; paths in
	// sentences are relative to it. Default "features".
	FeaturesDir string
	// Keep leaves every cluster up at the end of the run and prints how to
	// reach it.
	Keep bool
	// FailFast keeps the cluster of a scenario that failed (not one the
	// run's interrupt cut short) up as it was, as the evidence, and prints
	// at Close how to reach and remove it; the runner stops after that
	// scenario.
	FailFast bool
	// Poll is the nats entrypoint's configuration poll interval; default
	// harness.DefaultPoll.
	Poll time.Duration
	// Out receives the harness's narration and, with Keep, how to reach
	// the clusters.
	Out io.Writer
}

// World is the state of one run: the clusters raised so far. A cluster is
// leased to one scenario at a time: the scenarios that raise the same
// description (and topology) take turns on it, until one of them changes
// it (taints it) or fails; then it is torn down and the next scenario
// raises a fresh one. Scenarios running at once never share a cluster:
// each raises its own when none is free.
type World struct {
	opts Options

	mu       sync.Mutex
	idle     map[string][]*raised // by key: clean clusters no scenario holds
	leased   map[*raised]bool     // held by a scenario now
	retired  []*raised            // kept up for --keep
	evidence []evidence           // kept up for --fail-fast
	reg      *conformance.Registry
	// images are those the run has made sure of: its first cluster checks
	// them against the checkout, the later ones take them as they are.
	images images.Ensured
	// pool is the run's brokers and stores, recycled from one cluster to
	// the next (harness.Pool); made at the first raise, none with Keep or
	// FailFast, whose kept clusters keep theirs.
	pool    *harness.Pool
	poolErr error

	// installRecords are the installation's records the rows of @install
	// noted, by bus, for the scenario that compares them; noted is
	// signalled at each.
	installRecords map[string]installRecord
	noted          chan struct{}
}

// New makes the World of a run.
func New(opts Options) *World {
	if opts.FeaturesDir == "" {
		opts.FeaturesDir = "features"
	}
	if opts.Poll == 0 {
		opts.Poll = harness.DefaultPoll
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	return &World{opts: opts, idle: map[string][]*raised{}, leased: map[*raised]bool{}, noted: make(chan struct{})}
}

// InitSuite binds the suite hooks: at a bed's end the clusters no
// scenario holds are torn down (kept with Keep), since no later bed raises
// the same description and topology, and an idle cluster still takes
// memory and, with hosts running modules, the cores the next bed needs.
func (w *World) InitSuite(sc *godog.TestSuiteContext) {
	sc.AfterSuite(func() {
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		defer cancel()
		if err := w.closeIdle(ctx); err != nil {
			fmt.Fprintf(w.opts.Out, "tear down the bed's clusters: %v\n", err)
		}
	})
}

// closeIdle tears down, all at once, the clusters no scenario holds; with
// Keep it keeps them aside for Close to describe.
func (w *World) closeIdle(ctx context.Context) error {
	w.mu.Lock()
	var idle []*raised
	for _, free := range w.idle {
		idle = append(idle, free...)
	}
	w.idle = map[string][]*raised{}
	if w.opts.Keep {
		w.retired = append(w.retired, idle...)
		idle = nil
	}
	w.mu.Unlock()
	return closeAll(ctx, idle)
}

// closeAll tears down clusters at once: each takes seconds, mostly
// waiting on the engine.
func closeAll(ctx context.Context, all []*raised) error {
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, r := range all {
		wg.Go(func() { errs[i] = r.close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// InitScenario binds every step definition and the scenario hooks.
func (w *World) InitScenario(sc *godog.ScenarioContext) {
	s := &scenario{w: w, clients: map[string]*client{}}
	sc.After(s.after)
	s.bindServer(sc)
	s.bindStreams(sc)
	s.bindStatus(sc)
	s.bindAccounts(sc)
	s.bindReplies(sc)
	s.bindAMQPIsolation(sc)
	s.bindFaults(sc)
	s.bindDurability(sc)
	s.bindConformance(sc)
	s.bindBothBuses(sc)
	s.bindTorn(sc)
	s.bindLiving(sc)
	s.bindRollout(sc)
	s.bindPersons(sc)
	s.bindBuilds(sc)
	s.bindInstallRecords(sc)
	s.bindPredecessor(sc)
	s.bindAdoption(sc)
	s.bindCutover(sc)
	s.bindTraffic(sc)
}

// root is the checkout: Root, or the directory above FeaturesDir.
func (w *World) root() string {
	if w.opts.Root != "" {
		return w.opts.Root
	}
	abs, err := filepath.Abs(w.opts.FeaturesDir)
	if err != nil {
		return "."
	}
	return filepath.Dir(abs)
}

// path resolves a path named in a sentence.
func (w *World) path(rel string) string { return filepath.Join(w.opts.FeaturesDir, rel) }

// acquire leases the scenario of ctx a clean cluster raised from the
// description in the topology: one no scenario holds, or a new one. The
// time spent raising is the scenario's (beds.SpentRaising), and so is the
// cluster's narration while it holds it.
func (w *World) acquire(ctx context.Context, meshFile string, top topology.Topology, logDir string) (*raised, error) {
	key := meshFile + "\n" + top.String()
	w.mu.Lock()
	var r *raised
	if free := w.idle[key]; len(free) > 0 {
		r, w.idle[key] = free[len(free)-1], free[:len(free)-1]
		w.leased[r] = true
	}
	w.mu.Unlock()
	if r != nil {
		r.narration.to(beds.Narration(ctx))
		return r, nil
	}
	start := time.Now()
	r, err := raise(ctx, w.opts, &w.images, w.recycled(ctx), meshFile, top, logDir)
	beds.SpentRaising(ctx, time.Since(start))
	if err != nil {
		return nil, err
	}
	r.key = key
	w.mu.Lock()
	w.leased[r] = true
	w.mu.Unlock()
	return r, nil
}

// evidence is a cluster kept up because a scenario failed on it.
type evidence struct {
	r        *raised
	scenario string // the scenario that failed, for a person
}

// recycled is the run's pool of brokers and stores, made at its first
// call; nil with Keep or FailFast, or when it could not be made (each
// cluster then starts its own).
func (w *World) recycled(ctx context.Context) *harness.Pool {
	if w.opts.Keep || w.opts.FailFast {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pool == nil && w.poolErr == nil {
		w.pool, w.poolErr = harness.NewPool(ctx)
		if w.poolErr != nil {
			fmt.Fprintf(w.opts.Out, "brokers and stores are not recycled in this run: %v\n", w.poolErr)
		}
	}
	return w.pool
}

// release ends a scenario's lease of a cluster. With FailFast, the cluster
// of a scenario that failed (failed names it; "" when it did not) is kept
// as it is, and marked kept at once so that no later run reaps it.
// Otherwise a tainted cluster is not leased again: it is torn down, or
// with Keep kept aside; a clean one waits for the next scenario.
func (w *World) release(ctx context.Context, r *raised, failed string) error {
	keep := failed != "" && w.opts.FailFast
	r.narration.to(nil)
	w.mu.Lock()
	delete(w.leased, r)
	if !r.tainted && !keep {
		w.idle[r.worldKey()] = append(w.idle[r.worldKey()], r)
		w.mu.Unlock()
		return nil
	}
	switch {
	case keep:
		w.evidence = append(w.evidence, evidence{r: r, scenario: failed})
	case w.opts.Keep:
		w.retired = append(w.retired, r)
	}
	w.mu.Unlock()
	switch {
	case keep:
		beds.Logf(ctx, "fail-fast: cluster of run %s kept as it is; how to reach and remove it is printed at the end", r.session.ID())
		return r.session.Keep()
	case w.opts.Keep:
		return nil
	}
	return r.close(ctx)
}

// Close ends the run: every cluster still up is torn down, or with Keep
// described so a person can reach it; a cluster kept by FailFast is
// described, never torn down.
func (w *World) Close(ctx context.Context) error {
	w.mu.Lock()
	all := append([]*raised(nil), w.retired...)
	for _, free := range w.idle {
		all = append(all, free...)
	}
	// A cluster still leased belongs to a scenario that never ended (a hung
	// bed): it goes too.
	for r := range w.leased {
		all = append(all, r)
	}
	kept := w.evidence
	w.idle, w.leased, w.retired, w.evidence = map[string][]*raised{}, map[*raised]bool{}, nil, nil
	w.mu.Unlock()

	var errs *multierror.Error
	if w.opts.Keep {
		for _, r := range all {
			errs = multierror.Append(errs, r.session.Keep())
			fmt.Fprintf(w.opts.Out, "\nkept cluster run=%s (raised from %s; later runs leave it alone):\n%s\n", r.session.ID(), r.meshFile, r.describe())
		}
	} else {
		errs = multierror.Append(errs, closeAll(ctx, all))
	}
	w.mu.Lock()
	pool := w.pool
	w.pool = nil
	w.mu.Unlock()
	if pool != nil {
		fmt.Fprintf(w.opts.Out, "%s\n", pool.Summary())
		errs = multierror.Append(errs, pool.Close(ctx))
	}
	for _, e := range kept {
		fmt.Fprintf(w.opts.Out, "\nkept cluster run=%s of the failed scenario %s (--fail-fast; raised from %s; later runs leave it alone):\n%s\n",
			e.r.session.ID(), e.scenario, e.r.meshFile, e.r.describe())
	}
	return errs.ErrorOrNil()
}

// failure names the scenario for fail-fast when it failed, and is "" when it
// passed or the run's interrupt cut it short: an interrupted run tears
// down.
func failure(ctx context.Context, sc *godog.Scenario, err error) string {
	if err == nil || beds.RunInterrupted(ctx) {
		return ""
	}
	if _, s, ok := beds.Current(ctx); ok {
		return fmt.Sprintf("%q at %s", s.Title(), s.Where())
	}
	return fmt.Sprintf("%q", sc.Name)
}

// errNoCluster is a step run before the Background raised one.
var errNoCluster = errors.New("no cluster raised in this scenario (a Given step raises one)")
