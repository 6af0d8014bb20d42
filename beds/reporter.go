package beds

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// This file is the runner's side of a step's context: what a step may tell the run while
// it runs. Each function is a no-op (or returns the zero value) outside a run, so steps
// stay usable from plain go tests.

// Measurement is a number a step measured, e.g. the reload latency: printed as it is taken,
// listed in the bed's summary, written to measurements.json, junit.xml (a testcase
// property) and cucumber.json (an embedding of the step).
type Measurement struct {
	Bed      string `json:"bed"`
	Scenario string `json:"scenario"`
	Where    string `json:"where"`
	// Step is the step in progress when the measurement was taken.
	Step  string        `json:"step"`
	Name  string        `json:"name"`
	Value time.Duration `json:"-"`
	At    time.Time     `json:"at"`

	step int // index of Step in the scenario
}

// scope is what Run puts in each scenario's context.
type scope struct {
	t  *tracker
	sc *ScenarioResult
	l  *live
}

type scopeKey struct{}

func scopeOf(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// Measure records a measurement of the scenario in progress: name says what was measured
// ("reload latency"), value is how long it took.
func Measure(ctx context.Context, name string, value time.Duration) {
	if s := scopeOf(ctx); s != nil {
		s.t.measure(s.l, name, value)
	}
}

// Logf narrates a phase of a step on the run's progress output, indented under the step
// ("nats container up at 127.0.0.1:32771"). Keep it to one line when a phase starts and when
// a fault is applied or undone.
func Logf(ctx context.Context, format string, args ...any) {
	if s := scopeOf(ctx); s != nil {
		s.t.logf(s.l, fmt.Sprintf(format, args...))
	}
}

// SpentRaising adds d to the time the scenario in progress spent raising clusters (inside its
// steps): the summary and measurements.json give, per bed, the time raising apart from the
// rest of the steps'.
func SpentRaising(ctx context.Context, d time.Duration) {
	if s := scopeOf(ctx); s != nil {
		s.t.raising(s.l, d)
	}
}

// ClusterReset notes that the scenario in progress reset its cluster at its end and handed it
// on to the next scenario, rather than tearing it down: the summary and measurements.json count
// them beside the clusters raised.
func ClusterReset(ctx context.Context) {
	if s := scopeOf(ctx); s != nil {
		s.t.reset(s.l)
	}
}

// Narration is a writer whose whole lines are narrated as Logf would, under the scenario of
// ctx: hand it to what narrates on its own (the harness) while it works for that scenario. It
// is nil outside a scenario.
func Narration(ctx context.Context) io.Writer {
	s := scopeOf(ctx)
	if s == nil {
		return nil
	}
	return &lines{each: func(line string) {
		if line != "" {
			s.t.logf(s.l, line)
		}
	}}
}

// ArtifactDir is where the scenario in progress may save evidence (container logs, the
// composed configuration): REPORT/<bed>/<line>-<scenario>. It is "" when the run writes no
// report. The directory is not created until a step needs it: os.MkdirAll it first.
func ArtifactDir(ctx context.Context) string {
	s := scopeOf(ctx)
	if s == nil || s.t.reportDir == "" {
		return ""
	}
	return filepath.Join(s.t.reportDir, s.sc.Bed, fmt.Sprintf("%d-%s", s.sc.Line, slug(s.sc.Name)))
}

// Current returns the bed and the scenario in progress, e.g. for a step that raises a
// topology per bed.
func Current(ctx context.Context) (Bed, Scenario, bool) {
	s := scopeOf(ctx)
	if s == nil {
		return Bed{}, Scenario{}, false
	}
	return s.t.bed, s.sc.Scenario, true
}

// RunInterrupted reports whether the run the scenario of ctx belongs to has been interrupted:
// its context ended (Ctrl-C, SIGTERM, a caller's cancel) rather than the bed's timeout. A
// scenario failing then is reported interrupted, and its hooks should not take the failure
// for the product's (fail-fast keeps no evidence of it). Outside a run it reports whether
// ctx has ended.
func RunInterrupted(ctx context.Context) bool {
	if s := scopeOf(ctx); s != nil {
		return s.t.interrupted()
	}
	return ctx.Err() != nil
}

// slug makes a scenario name safe as one path element.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// Unfinished is how many scenarios of the bed in progress, other than the one of ctx, carry
// tag and have not ended: not started yet, or running. A step that needs what other scenarios
// of the run produce (a comparison of two outline rows) waits while it is above zero, however
// the scenarios are scheduled. Outside a run it is 0.
func Unfinished(ctx context.Context, tag string) int {
	s := scopeOf(ctx)
	if s == nil {
		return 0
	}
	return s.t.unfinished(s.l, tag)
}
