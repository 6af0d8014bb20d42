package beds

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/cucumber/godog"
)

// Status is the outcome of a step or a scenario.
type Status int

// The outcomes, from best to worst for a release gate: every one but Passed fails the run.
const (
	// NotRun: the scenario never started (fail-fast, timeout, interrupt).
	NotRun Status = iota
	// Passed: every step passed and teardown succeeded.
	Passed
	// Skipped: a step returned godog.ErrSkip.
	Skipped
	// Interrupted: the run was interrupted (Ctrl-C, SIGTERM: its context ended other than
	// by the bed's timeout) while the scenario ran; what it asserts is not known, so it is
	// neither passed nor failed.
	Interrupted
	// Failed: a step or a hook returned an error: the product did not do what was asserted.
	Failed
	// Errored: the error wraps ErrInfrastructure: the bed could not check the product.
	Errored
	// Undefined: no step definition matches a step.
	Undefined
	// Pending: a step definition returned godog.ErrPending.
	Pending
	// Ambiguous: several step definitions match a step.
	Ambiguous
)

// String is the status as reports spell it.
func (s Status) String() string {
	switch s {
	case Passed:
		return "passed"
	case Skipped:
		return "skipped"
	case Interrupted:
		return "interrupted"
	case Failed:
		return "failed"
	case Errored:
		return "error"
	case Undefined:
		return "undefined"
	case Pending:
		return "pending"
	case Ambiguous:
		return "ambiguous"
	}
	return "not run"
}

// ErrInfrastructure marks a failure of the bed's machinery (Docker, an image build, a
// container that never came up) rather than of the product under test. A step wraps it (or
// a sentinel listed in Options.Infrastructure), e.g.
// fmt.Errorf("start nats: %w: %w", beds.ErrInfrastructure, err); reports count such a
// scenario as an error, not a failure.
var ErrInfrastructure = errors.New("infrastructure")

// isInfra reports whether err is a failure of the machinery: it wraps ErrInfrastructure or
// one of the caller's sentinels.
func isInfra(err error, sentinels []error) bool {
	if errors.Is(err, ErrInfrastructure) {
		return true
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// stepStatus maps godog's verdict on a step to ours.
func stepStatus(s godog.StepResultStatus, err error, infra []error) Status {
	switch s {
	case godog.StepPassed:
		return Passed
	case godog.StepSkipped:
		return Skipped
	case godog.StepUndefined:
		return Undefined
	case godog.StepPending:
		return Pending
	case godog.StepAmbiguous:
		return Ambiguous
	}
	if isInfra(err, infra) {
		return Errored
	}
	return Failed
}

// StepResult is one step as it ran.
type StepResult struct {
	// Text is the step with its keyword, as written.
	Text   string
	Status Status
	// Started is when the step began (wall clock), to line up with logs.
	Started time.Time
	Elapsed time.Duration
	// Err is why the step did not pass; nil when it passed or was skipped.
	Err error
}

// ScenarioResult is one scenario as it ran (or why it did not).
type ScenarioResult struct {
	Scenario
	// Bed is the name of the bed the scenario belongs to.
	Bed     string
	Status  Status
	Started time.Time
	// Elapsed covers the scenario's hooks as well as its steps.
	Elapsed time.Duration
	// Setup is the time from the scenario's start to its first step (the hooks before it),
	// Teardown the time from its last step to its end (the hooks after it: a cluster
	// released or torn down). Raising is the part of its steps' time spent raising clusters,
	// as the steps said (SpentRaising).
	Setup, Teardown, Raising time.Duration
	// Raised is how many clusters the scenario raised (SpentRaising); Reset says its cluster
	// was reset at its end and handed on to the next scenario (ClusterReset).
	Raised int
	Reset  bool
	// Err is the first reason the scenario did not pass, teardown errors joined to it.
	Err          error
	Steps        []StepResult
	Measurements []Measurement
}

// BedResult is one bed as it ran.
type BedResult struct {
	Bed       Bed
	Scenarios []*ScenarioResult
	Started   time.Time
	Elapsed   time.Duration
	// Parallel is how many of its scenarios could run at once (Options.Parallel).
	Parallel int
	// Err is trouble with the run of the bed itself (timeout, a hang, a panic in a hook),
	// apart from its scenarios' failures.
	Err error

	// cut is set when the run was interrupted before the bed ended.
	cut bool
	// unselected are the bed's scenarios the run's selection left out.
	unselected []Scenario
}

// Counts tallies scenarios by status.
type Counts map[Status]int

// Total is the number of scenarios counted.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Counts tallies b's scenarios by status.
func (b BedResult) Counts() Counts {
	c := Counts{}
	for _, s := range b.Scenarios {
		c[s.Status]++
	}
	return c
}

// OK reports whether every scenario of the bed passed. A bed none of whose scenarios the
// tags selected is OK; Result.OK wants at least one scenario in the whole run.
func (b BedResult) OK() bool {
	c := b.Counts()
	return b.Err == nil && c[Passed] == c.Total()
}

// Interrupted reports whether the bed is not green only because the run was interrupted:
// every scenario passed, was interrupted, or did not run.
func (b BedResult) Interrupted() bool {
	c := b.Counts()
	return b.cut && b.Err == nil && !b.OK() && c[Passed]+c[Interrupted]+c[NotRun] == c.Total()
}

// Result is a whole run.
type Result struct {
	Beds    []BedResult
	Started time.Time
	Elapsed time.Duration

	// others are, for a result read back from a report (ReadReport), the scenarios of the
	// beds on its page that were not in the run.
	others map[string][]Scenario
}

// Counts tallies every scenario of the run by status.
func (r Result) Counts() Counts {
	c := Counts{}
	for _, b := range r.Beds {
		for s, n := range b.Counts() {
			c[s] += n
		}
	}
	return c
}

// OK reports whether at least one scenario ran and every bed and scenario passed: the only
// case bedrun exits 0.
func (r Result) OK() bool {
	if r.Counts().Total() == 0 {
		return false
	}
	for _, b := range r.Beds {
		if !b.OK() {
			return false
		}
	}
	return true
}

// Interrupted reports whether the run is not green only because it was interrupted: no bed
// failed, and one was interrupted.
func (r Result) Interrupted() bool {
	cut := false
	for _, b := range r.Beds {
		switch {
		case b.Interrupted():
			cut = true
		case !b.OK():
			return false
		}
	}
	return cut
}

// Stopped returns the first bed that is not green, other than by an interrupt: the bed at
// which Run stopped, the later ones not run.
func (r Result) Stopped() (BedResult, bool) {
	for _, b := range r.Beds {
		if !b.OK() && !b.Interrupted() {
			return b, true
		}
	}
	return BedResult{}, false
}

// Measurements lists every measurement of the run in the order they were taken.
func (r Result) Measurements() []Measurement {
	var out []Measurement
	for _, b := range r.Beds {
		for _, s := range b.Scenarios {
			out = append(out, s.Measurements...)
		}
	}
	return out
}

// Time is where a bed's time went: its wall time, and its scenarios' time summed by phase.
// Run in parallel, the scenarios' sum exceeds the wall time; their ratio is how many ran at
// once on average.
type Time struct {
	// Wall is the bed's elapsed time, from its first hook to its last.
	Wall time.Duration
	// Scenarios is the sum of its scenarios' Elapsed: Setup + Raising + Steps + Teardown.
	Scenarios time.Duration
	// Setup, Raising and Teardown are the scenarios' sums (ScenarioResult); Steps is the
	// time in steps other than raising.
	Setup, Raising, Steps, Teardown time.Duration
	// Raised is how many clusters the scenarios raised, Reset how many of them a scenario
	// reset and handed on.
	Raised, Reset int
}

// Time sums the time of b's scenarios by phase.
func (b BedResult) Time() Time {
	t := Time{Wall: b.Elapsed}
	for _, s := range b.Scenarios {
		t.Scenarios += s.Elapsed
		t.Setup += s.Setup
		t.Raising += s.Raising
		t.Teardown += s.Teardown
		t.Raised += s.Raised
		if s.Reset {
			t.Reset++
		}
	}
	t.Steps = max(0, t.Scenarios-t.Setup-t.Raising-t.Teardown)
	return t
}

// Slowest is b's n slowest scenarios that ran, slowest first.
func (b BedResult) Slowest(n int) []*ScenarioResult {
	var ran []*ScenarioResult
	for _, s := range b.Scenarios {
		if s.Status != NotRun {
			ran = append(ran, s)
		}
	}
	slices.SortStableFunc(ran, func(x, y *ScenarioResult) int { return cmp.Compare(y.Elapsed, x.Elapsed) })
	return ran[:min(n, len(ran))]
}
