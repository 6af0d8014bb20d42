package beds

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"
)

// tracker follows one bed's godog suite through hooks that surround the caller's: it is
// first to see a scenario or a step begin and last to see it end, so its timings and
// verdicts include the caller's hooks. It exists because a godog formatter can only be
// registered in godog's global table and receives no per-run state.
//
// godog runs a bed's scenarios one at a time or, with Options.Parallel, several at once, each
// on a goroutine of its own. What one scenario's hooks track is its own (a live, reached
// through the scenario's context); what the scenarios share is under mu, which Run also takes
// to read the results while a hung suite may still be running.
type tracker struct {
	mu          sync.Mutex
	run         context.Context // the run's, not the bed's: it ends on an interrupt only
	bed         Bed
	featuresDir string
	reportDir   string
	p           *printer
	opts        *Options
	started     time.Time

	byKey map[string]*ScenarioResult
	all   []*ScenarioResult

	running   []*live   // the scenarios started and not yet ended, in the order they started
	begun     bool      // a scenario has started
	lastEnd   time.Time // when the last step or scenario ended
	abandoned bool      // Run gave up on a hung suite: print nothing more
}

// live is one scenario while it runs.
type live struct {
	r *ScenarioResult
	// p prints the scenario's lines: the run's printer when the bed runs one scenario at a
	// time; with Parallel a printer into buf, shown under the scenario's end when it did not
	// pass, so that concurrent scenarios' steps never interleave.
	p   *printer
	buf *bytes.Buffer

	canc      bool // refused because the bed's context had ended
	closed    bool // has its verdict; godog may still report its skipped steps
	rest      bool // its remaining steps are already reported skipped
	inStep    bool // a step is running: the heartbeat may report it
	stepStart time.Time
	lastBeat  time.Time // when the heartbeat last reported it
	lastEnd   time.Time // when its last step ended
}

func newTracker(run context.Context, b Bed, planned []Scenario, o *Options, p *printer) *tracker {
	t := &tracker{
		run: run, bed: b, featuresDir: o.FeaturesDir, reportDir: o.ReportDir, p: p, opts: o,
		byKey: map[string]*ScenarioResult{}, started: time.Now(),
	}
	for _, s := range planned {
		r := &ScenarioResult{Scenario: s, Bed: b.Name, Status: NotRun}
		t.byKey[s.Where()] = r
		t.all = append(t.all, r)
	}
	t.lastEnd = t.started
	return t
}

// parallel reports whether the bed runs several scenarios at once.
func (t *tracker) parallel() bool { return t.opts.Parallel > 1 }

// initSuite binds the tracker's opening hooks, then the caller's suite.
//
// godog copies the suite for each scenario and appends the scenario's hooks and steps to the
// copy's slices: the suite-wide slices must be full (len == cap) for concurrent scenarios not
// to append into one array. One hook each, appended to nil, is.
func (t *tracker) initSuite(sc *godog.TestSuiteContext) {
	s := sc.ScenarioContext()
	s.Before(t.beforeScenario)
	s.StepContext().Before(t.beforeStep)
	if t.opts.Suite != nil {
		t.opts.Suite(sc)
	}
}

// initScenario binds the caller's scenario, then the tracker's closing hooks.
func (t *tracker) initScenario(sc *godog.ScenarioContext) {
	if t.opts.Scenario != nil {
		t.opts.Scenario(sc)
	}
	sc.StepContext().After(t.afterStep)
	sc.After(t.afterScenario)
}

// liveOf is the scenario of ctx as the tracker follows it; nil outside one.
func liveOf(ctx context.Context) *live {
	if s := scopeOf(ctx); s != nil {
		return s.l
	}
	return nil
}

func (t *tracker) beforeScenario(ctx context.Context, p *godog.Scenario) (context.Context, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := scenarioKey(p.Uri, p.Location)
	r, ok := t.byKey[key]
	if !ok {
		// Not in the plan: the files changed under us. Run it and say so in the report.
		r = &ScenarioResult{Scenario: Scenario{Feature: featureOf(p.Uri), Name: p.Name}, Bed: t.bed.Name}
		if p.Location != nil {
			r.Line = int(p.Location.Line)
		}
		t.byKey[key] = r
		t.all = append(t.all, r)
	}
	if !t.begun && len(t.all) > 0 && !t.abandoned {
		t.p.phase("before suite", time.Since(t.lastEnd))
	}
	t.begun = true
	l := &live{r: r, p: t.p}
	if t.parallel() {
		l.buf = &bytes.Buffer{}
		l.p = &printer{out: l.buf, color: t.p.color, buffered: true}
	}
	r.Started = time.Now()
	l.lastEnd = r.Started
	t.running = append(t.running, l)
	ctx = context.WithValue(ctx, scopeKey{}, &scope{t: t, sc: r, l: l})
	if ctx.Err() != nil {
		// The bed ran out of time or was interrupted: refuse to start, so the caller's
		// steps fail at once and the scenario is reported as not run.
		l.canc = true
		return ctx, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	if !t.abandoned {
		t.p.scenarioStart(t.bed.Name, r, t.featuresDir, t.parallel())
	}
	return ctx, nil
}

func (t *tracker) beforeStep(ctx context.Context, st *godog.Step) (context.Context, error) {
	if nested(st) {
		return ctx, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := liveOf(ctx)
	now := time.Now()
	if l == nil {
		return ctx, nil
	}
	if l.canc || l.rest || l.closed || t.abandoned {
		l.stepStart = now
		return ctx, nil
	}
	if len(l.r.Steps) == 0 {
		l.r.Setup = now.Sub(l.r.Started)
		l.p.phase("setup", l.r.Setup)
	}
	l.stepStart, l.lastBeat, l.inStep = now, now, true
	l.p.running(l.stepText(st))
	return ctx, nil
}

func (t *tracker) afterStep(ctx context.Context, st *godog.Step, status godog.StepResultStatus, err error) (context.Context, error) {
	if nested(st) {
		return ctx, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := liveOf(ctx)
	now := time.Now()
	t.lastEnd = now
	if l == nil {
		return ctx, nil
	}
	l.lastEnd, l.inStep = now, false
	if l.canc || l.closed || l.rest || t.abandoned {
		return ctx, nil
	}
	r := StepResult{Text: l.stepText(st), Status: stepStatus(status, err, t.opts.Infrastructure), Started: l.stepStart, Elapsed: now.Sub(l.stepStart)}
	if (r.Status == Failed || r.Status == Errored) && t.interrupted() {
		// Cut short by the interrupt: its error says nothing of the product.
		r.Status = Interrupted
	}
	if r.Status != Passed && r.Status != Skipped {
		r.Err = err
	}
	if r.Status == Skipped {
		r.Elapsed = 0
	}
	l.r.Steps = append(l.r.Steps, r)
	l.p.step(r)
	if r.Status != Passed {
		// godog skips the rest; show them under the step that stopped the scenario,
		// before the teardown's narration.
		l.skipRest()
	}
	// Returning err would make godog join it to itself.
	return ctx, nil
}

func (t *tracker) afterScenario(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := liveOf(ctx)
	if l == nil || t.abandoned {
		return ctx, nil
	}
	t.running = slices.DeleteFunc(t.running, func(o *live) bool { return o == l })
	r := l.r
	now := time.Now()
	t.lastEnd = now
	r.Elapsed = now.Sub(r.Started)
	if l.canc {
		r.Status, r.Err = NotRun, context.Cause(ctx)
		return ctx, nil
	}
	// Steps godog has not reported yet (an After hook failing the last step) are skipped.
	l.skipRest()
	r.Teardown = now.Sub(l.lastEnd)
	l.p.phase("teardown", r.Teardown)
	l.closed = true
	r.Status, r.Err = verdict(r.Steps, err, t.opts.Infrastructure, t.interrupted())
	if cause := context.Cause(t.run); r.Status == Interrupted {
		// The interrupt first: it is why the scenario stopped, whatever its steps and
		// teardown said after it.
		switch {
		case r.Err == nil:
			r.Err = cause
		case r.Err.Error() != cause.Error():
			r.Err = fmt.Errorf("%w; %v", cause, r.Err)
		}
	}
	if err != nil && !seenInSteps(r.Steps, err) {
		// The error came from an After hook (teardown), which no step line showed.
		l.p.println(l.p.paint(ansiRed, "  ✗ after scenario:"))
		l.p.detail(err)
	}
	t.end(l)
	return ctx, nil
}

// end prints the scenario's end: its verdict line and, run in parallel, the lines it kept
// back when it did not pass.
func (t *tracker) end(l *live) {
	if !t.parallel() {
		t.p.scenarioEnd(l.r)
		return
	}
	t.p.scenarioEndNamed(t.bed.Name, l.r, t.featuresDir)
	if l.r.Status != Passed && l.buf.Len() > 0 {
		t.p.block(l.buf.String())
	}
}

// skipRest records and shows the steps of the scenario that will not run.
func (l *live) skipRest() {
	r := l.r
	for i := len(r.Steps); i < len(r.Scenario.Steps); i++ {
		sr := StepResult{Text: r.Scenario.Steps[i], Status: Skipped}
		r.Steps = append(r.Steps, sr)
		l.p.step(sr)
	}
	l.rest = true
}

// nested reports whether st is a sub-step of a step that returned godog.Steps: godog runs
// the step hooks for those too, with a step that has no id. The outer step accounts for them.
func nested(st *godog.Step) bool { return st.Id == "" }

// interrupted reports whether the run has been interrupted.
func (t *tracker) interrupted() bool { return t.run.Err() != nil }

// verdict is a scenario's status: its first step that neither passed nor was skipped, or a
// failure from its hooks (interrupted when the run was), or skipped when a step skipped it,
// or passed.
func verdict(steps []StepResult, err error, infra []error, interrupted bool) (Status, error) {
	for _, s := range steps {
		if s.Status != Passed && s.Status != Skipped {
			if err == nil {
				err = s.Err
			}
			return s.Status, err
		}
	}
	if err != nil {
		switch {
		case interrupted:
			return Interrupted, err
		case isInfra(err, infra):
			return Errored, err
		}
		return Failed, err
	}
	for _, s := range steps {
		if s.Status == Skipped {
			return Skipped, nil
		}
	}
	return Passed, nil
}

// seenInSteps reports whether err is exactly what a step line already printed.
func seenInSteps(steps []StepResult, err error) bool {
	for _, s := range steps {
		if s.Err != nil && s.Err.Error() == err.Error() {
			return true
		}
	}
	return false
}

// stepText is the scenario's step in progress with the keyword the feature file gives it; st
// is godog's view of it, or nil to take the plan's word.
func (l *live) stepText(st *godog.Step) string {
	i := len(l.r.Steps)
	if i < len(l.r.Scenario.Steps) {
		s := l.r.Scenario.Steps[i]
		if st == nil || strings.HasSuffix(s, " "+st.Text) {
			return s
		}
	}
	if st == nil {
		return "a step"
	}
	return typeKeyword(st.Type) + st.Text
}

// heartbeat reports, every interval until stop is closed, each step that is still running: on
// a log that is not a terminal, a long wait would otherwise look like a hang.
func (t *tracker) heartbeat(interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			for _, l := range t.running {
				if !l.inStep || t.abandoned || now.Sub(l.lastBeat) < interval {
					continue
				}
				l.lastBeat = now
				what := l.stepText(nil)
				if t.parallel() {
					what = fmt.Sprintf("%s › %s: %s", t.bed.Name, l.r.Title(), what)
				}
				t.p.println(t.p.paint(ansiDim, fmt.Sprintf("    ⋯ still running: %s (%s)", what, short(now.Sub(l.stepStart)))))
			}
			t.mu.Unlock()
		}
	}
}

// hung closes the scenarios whose steps never returned.
func (t *tracker) hung(err error) {
	for _, l := range t.running {
		r := l.r
		if l.closed || l.canc {
			continue
		}
		if l.inStep && len(r.Steps) < len(r.Scenario.Steps) {
			sr := StepResult{Text: r.Scenario.Steps[len(r.Steps)], Status: Failed, Started: l.stepStart, Elapsed: time.Since(l.stepStart), Err: err}
			r.Steps = append(r.Steps, sr)
			l.p.step(sr)
		}
		r.Status, r.Err, r.Elapsed = Failed, err, time.Since(r.Started)
		l.closed = true
		t.end(l)
	}
	t.abandoned = true
}

func (t *tracker) measure(l *live, name string, v time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.abandoned {
		return
	}
	r := l.r
	m := Measurement{Bed: t.bed.Name, Scenario: r.Title(), Where: displayPath(t.featuresDir, r.Where()), Name: name, Value: v, At: time.Now(), step: len(r.Steps)}
	if m.step < len(r.Scenario.Steps) {
		m.Step = r.Scenario.Steps[m.step]
	}
	r.Measurements = append(r.Measurements, m)
	l.p.measured(m)
}

// raising adds d to the time the scenario spent raising clusters, and one cluster to those
// it raised.
func (t *tracker) raising(l *live, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.r.Raising += d
	l.r.Raised++
}

// reset notes that the scenario's cluster was reset and handed on.
func (t *tracker) reset(l *live) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.r.Reset = true
}

func (t *tracker) logf(l *live, line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.abandoned {
		l.p.note(line)
	}
}

func (t *tracker) unfinished(self *live, tag string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.all {
		if r == self.r || !slices.Contains(r.Tags, tag) {
			continue
		}
		if r.Started.IsZero() || slices.ContainsFunc(t.running, func(l *live) bool { return l.r == r }) {
			n++
		}
	}
	return n
}
