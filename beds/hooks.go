package beds

import (
	"context"
	"fmt"
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
// godog runs a suite on one goroutine (Concurrency 1); the mutex is for Run, which reads the
// results while a hung suite may still be running.
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

	cur       *ScenarioResult
	curCanc   bool // cur was refused because the bed's context had ended
	closed    bool // cur has its verdict; godog may still report its skipped steps
	rest      bool // cur's remaining steps are already reported skipped
	stepStart time.Time
	inStep    bool      // a step is running: the heartbeat may report it
	lastBeat  time.Time // when the heartbeat last reported
	lastEnd   time.Time // when the last step or scenario ended
	abandoned bool      // Run gave up on a hung suite: print nothing more
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

// initSuite binds the tracker's opening hooks, then the caller's suite.
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
	if t.cur == nil && len(t.all) > 0 && !t.abandoned {
		t.p.phase("before suite", time.Since(t.lastEnd))
	}
	t.cur, t.curCanc, t.closed, t.rest = r, false, false, false
	r.Started = time.Now()
	t.lastEnd = r.Started
	ctx = context.WithValue(ctx, scopeKey{}, &scope{t: t, sc: r})
	if ctx.Err() != nil {
		// The bed ran out of time or was interrupted: refuse to start, so the caller's
		// steps fail at once and the scenario is reported as not run.
		t.curCanc = true
		return ctx, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	if !t.abandoned {
		t.p.scenarioStart(t.bed.Name, r, t.featuresDir)
	}
	return ctx, nil
}

func (t *tracker) beforeStep(ctx context.Context, st *godog.Step) (context.Context, error) {
	if nested(st) {
		return ctx, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.cur == nil || t.curCanc || t.rest || t.closed || t.abandoned {
		t.stepStart = now
		return ctx, nil
	}
	if len(t.cur.Steps) == 0 {
		t.p.phase("setup", now.Sub(t.cur.Started))
	}
	t.stepStart, t.lastBeat, t.inStep = now, now, true
	t.p.running(t.stepText(st))
	return ctx, nil
}

func (t *tracker) afterStep(ctx context.Context, st *godog.Step, status godog.StepResultStatus, err error) (context.Context, error) {
	if nested(st) {
		return ctx, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.lastEnd, t.inStep = now, false
	if t.cur == nil || t.curCanc || t.closed || t.rest || t.abandoned {
		return ctx, nil
	}
	r := StepResult{Text: t.stepText(st), Status: stepStatus(status, err, t.opts.Infrastructure), Elapsed: now.Sub(t.stepStart)}
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
	t.cur.Steps = append(t.cur.Steps, r)
	t.p.step(r)
	if r.Status != Passed {
		// godog skips the rest; show them under the step that stopped the scenario,
		// before the teardown's narration.
		t.skipRest()
	}
	// Returning err would make godog join it to itself.
	return ctx, nil
}

func (t *tracker) afterScenario(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.cur
	if r == nil || t.abandoned {
		return ctx, nil
	}
	now := time.Now()
	r.Elapsed = now.Sub(r.Started)
	if t.curCanc {
		r.Status, r.Err = NotRun, context.Cause(ctx)
		t.lastEnd = now
		return ctx, nil
	}
	// Steps godog has not reported yet (an After hook failing the last step) are skipped.
	t.skipRest()
	t.p.phase("teardown", now.Sub(t.lastEnd))
	t.lastEnd = now
	t.closed = true
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
		t.p.println(t.p.paint(ansiRed, "  ✗ after scenario:"))
		t.p.detail(err)
	}
	t.p.scenarioEnd(r)
	return ctx, nil
}

// skipRest records and shows the steps of the scenario in progress that will not run.
func (t *tracker) skipRest() {
	r := t.cur
	for i := len(r.Steps); i < len(r.Scenario.Steps); i++ {
		sr := StepResult{Text: r.Scenario.Steps[i], Status: Skipped}
		r.Steps = append(r.Steps, sr)
		t.p.step(sr)
	}
	t.rest = true
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

// stepText is the step in progress with the keyword the feature file gives it; st is
// godog's view of it, or nil to take the plan's word.
func (t *tracker) stepText(st *godog.Step) string {
	if t.cur != nil {
		i := len(t.cur.Steps)
		if i < len(t.cur.Scenario.Steps) {
			s := t.cur.Scenario.Steps[i]
			if st == nil || strings.HasSuffix(s, " "+st.Text) {
				return s
			}
		}
	}
	if st == nil {
		return "a step"
	}
	return typeKeyword(st.Type) + st.Text
}

// heartbeat reports, every interval until stop is closed, a step that is still running: on a
// log that is not a terminal, a long wait would otherwise look like a hang.
func (t *tracker) heartbeat(interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			if t.inStep && !t.abandoned && t.cur != nil && now.Sub(t.lastBeat) >= interval {
				t.lastBeat = now
				t.p.println(t.p.paint(ansiDim, fmt.Sprintf("    ⋯ still running: %s (%s)",
					t.stepText(nil), short(now.Sub(t.stepStart)))))
			}
			t.mu.Unlock()
		}
	}
}

// hung closes the scenario whose step never returned.
func (t *tracker) hung(err error) {
	r := t.cur
	if r == nil || t.closed || t.curCanc {
		return
	}
	if t.inStep && len(r.Steps) < len(r.Scenario.Steps) {
		sr := StepResult{Text: r.Scenario.Steps[len(r.Steps)], Status: Failed, Elapsed: time.Since(t.stepStart), Err: err}
		r.Steps = append(r.Steps, sr)
		t.p.step(sr)
	}
	r.Status, r.Err, r.Elapsed = Failed, err, time.Since(r.Started)
	t.p.scenarioEnd(r)
	t.closed, t.abandoned = true, true
}

func (t *tracker) measure(r *ScenarioResult, name string, v time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.abandoned {
		return
	}
	m := Measurement{Bed: t.bed.Name, Scenario: r.Title(), Where: displayPath(t.featuresDir, r.Where()), Name: name, Value: v, At: time.Now(), step: len(r.Steps)}
	if m.step < len(r.Scenario.Steps) {
		m.Step = r.Scenario.Steps[m.step]
	}
	r.Measurements = append(r.Measurements, m)
	t.p.measured(m)
}

func (t *tracker) logf(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.abandoned {
		t.p.note(line)
	}
}
