package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
)

// genesis is a stand-in for features/1-genesis.feature, which the registry names.
const genesis = `@genesis
Feature: Genesis
  Scenario: The streams exist
    Given a step passes

  @reload
  Scenario: A change is live
    Given a step passes
    Then a step fails

  Scenario Outline: A module cannot publish outside its emits
    Given a step passes
    Examples:
      | module | subject |
      | sensor | forged  |
`

// fakeBind binds two steps, and records the options and whether the closer ran.
type fakeBind struct {
	opts   stepOptions
	bound  bool
	closed bool
}

func (f *fakeBind) bind(o stepOptions) (func(*godog.TestSuiteContext), func(*godog.ScenarioContext), func() error) {
	f.opts, f.bound = o, true
	return nil, func(sc *godog.ScenarioContext) {
			sc.Step(`^a step passes$`, func() error { return nil })
			sc.Step(`^a step fails$`, func() error { return errors.New("expected 5 users, got 4") })
		}, func() error {
			f.closed = true
			return nil
		}
}

func featuresDir(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if body != "" {
		if err := os.WriteFile(filepath.Join(dir, "1-genesis.feature"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func bedrun(t *testing.T, f *fakeBind, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if f == nil {
		f = &fakeBind{}
	}
	code := run(context.Background(), args, env{stdout: &out, stderr: &errOut, bind: f.bind})
	t.Logf("bedrun %s → %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

func TestList(t *testing.T) {
	dir := featuresDir(t, genesis)
	code, out, _ := bedrun(t, nil, "list", "genesis", "--features", dir)
	if code != exitPass {
		t.Fatalf("expected list to exit 0, got %d", code)
	}
	for _, want := range []string{
		"1  genesis (genesis-broker) · owner",
		filepath.Join(dir, "1-genesis.feature") + " · 3 scenarios · @genesis",
		":3    The streams exist",
		":7    A change is live  @reload",
		":15   A module cannot publish outside its emits (sensor, forged)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected list to contain %q", want)
		}
	}

	code, out, _ = bedrun(t, nil, "list", "1", "--tags", "@reload", "--features", dir, "--steps")
	if code != exitPass || strings.Contains(out, "The streams exist") || !strings.Contains(out, "Then a step fails") {
		t.Fatalf("expected list --tags @reload --steps to show only the reload scenario with its steps, got %d:\n%s", code, out)
	}
}

func TestListRun(t *testing.T) {
	code, out, _ := bedrun(t, nil, "list", "genesis", "--features", featuresDir(t, genesis), "--run", "change")
	if code != exitPass || strings.Contains(out, "The streams exist") || !strings.Contains(out, "A change is live") {
		t.Fatalf("expected list --run to show only the matching scenario, got %d:\n%s", code, out)
	}
}

func TestListMissingFeature(t *testing.T) {
	code, out, _ := bedrun(t, nil, "list", "--features", featuresDir(t, ""))
	if code != exitFail || !strings.Contains(out, "1-genesis.feature") {
		t.Fatalf("expected list to fail naming the missing feature, got %d:\n%s", code, out)
	}
}

func TestRunExitStatus(t *testing.T) {
	dir := featuresDir(t, genesis)
	f := &fakeBind{}
	code, out, _ := bedrun(t, f, "genesis", "--features", dir, "--tags", "~@reload", "--keep", "--no-color")
	if code != exitPass {
		t.Fatalf("expected 0 when every scenario passed, got %d", code)
	}
	if !f.closed || !f.opts.Keep || f.opts.FeaturesDir != dir {
		t.Errorf("expected the steps bound with --keep and the features, and closed; got %+v closed=%v", f.opts, f.closed)
	}
	if !strings.Contains(out, "PASS genesis: 2 passed of 2 scenarios") {
		t.Errorf("expected the bed's summary")
	}

	report := filepath.Join(t.TempDir(), "out")
	code, out, _ = bedrun(t, nil, "--report", report, "1", "--features", dir)
	if code != exitFail || !strings.Contains(out, "expected 5 users, got 4") {
		t.Fatalf("expected 1 with the failure shown when a scenario failed, got %d", code)
	}
	for _, name := range []string{"index.html", "messages.ndjson", "junit.xml", "cucumber.json", "measurements.json", "matrix.json"} {
		if _, err := os.Stat(filepath.Join(report, name)); err != nil {
			t.Errorf("expected %s in the report: %v", name, err)
		}
	}
	// The page is rendered again from the run's messages, raising nothing.
	page := filepath.Join(report, "index.html")
	if err := os.Remove(page); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := bedrun(t, nil, "report", report); code != exitPass || !strings.Contains(out, "report: "+page) {
		t.Fatalf("bedrun report: expected 0 and the page named, got %d: %s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "expected 5 users, got 4") {
		t.Fatalf("expected the page rendered again with the failure inline: %v", err)
	}

	// The rerun hint runs exactly the failed scenario again.
	i := strings.Index(out, "rerun: bedrun genesis --run '")
	if i < 0 {
		t.Fatalf("expected a rerun hint")
	}
	hint := strings.TrimSuffix(strings.SplitN(out[i:], "\n", 2)[0], "'")
	hint = hint[len("rerun: bedrun genesis --run '"):]
	code, out, _ = bedrun(t, nil, "genesis", "--features", dir, "--run", hint)
	if code != exitFail || !strings.Contains(out, "FAIL genesis: 1 failed of 1 scenario") {
		t.Fatalf("expected the hint to rerun just the failed scenario, got %d", code)
	}

	// The binding bedrun ships with today defines no step: strict makes that a failure.
	var o, e bytes.Buffer
	code = run(context.Background(), []string{"genesis", "--features", dir}, env{stdout: &o, stderr: &e, bind: bindSteps})
	if code != exitFail || !strings.Contains(o.String(), "undefined") {
		t.Fatalf("expected undefined steps to fail the run, got %d:\n%s", code, o.String())
	}
}

func TestUsageErrors(t *testing.T) {
	dir := featuresDir(t, genesis)
	notHistory := filepath.Join(t.TempDir(), "history.json")
	if err := os.WriteFile(notHistory, []byte("<html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"genesys"}, []string{`unknown bed "genesys"; choose one of: genesis (1), adoption (2), conformance (3), living (4), cutover (5), all`}},
		{[]string{"genesis,nope", "--features", dir}, []string{`unknown bed "nope"; choose one of: genesis (1)`}},
		{[]string{}, []string{"no bed given"}},
		{[]string{"genesis", "--bogus"}, []string{"flag provided but not defined: -bogus"}},
		{[]string{"genesis", "adoption"}, []string{"one bed argument at a time"}},
		{[]string{"genesis", "--features", dir, "--tags", "@nothing"},
			[]string{`no scenarios selected (tags "@nothing", in 1 bed); the scenarios' tags: @genesis @reload`, "bedrun list"}},
		{[]string{"list", "nope"}, []string{`unknown bed "nope"`}},
		{[]string{"genesis", "--features", dir, "--tags", "not @reload"},
			[]string{`bad tag expression "not @reload": term "not @reload"; godog knows "@a,@b" (or), "@a && @b" (and), "~@a" (not)`}},
		{[]string{"list", "--features", dir, "--tags", "@a ||"}, []string{"bad tag expression"}},
		{[]string{"images", "x"}, []string{"images takes no argument"}},
		{[]string{"report"}, []string{"report takes the directory of a run's report"}},
		{[]string{"genesis", "--features", dir, "--history", notHistory}, []string{"not a history of the beds"}},
		{[]string{"report", dir, "--tags", "@reload"}, []string{"report takes no flags but --features"}},
		{[]string{"report", dir}, []string{"no messages.ndjson there: give the directory a run's --report wrote"}},
		{[]string{"genesis", "--features", dir, "--run", "("},
			[]string{`invalid value "(" for flag -run: not a regular expression (Go's RE2 syntax`, "missing closing )"}},
		{[]string{"genesis", "--features", dir, "--run", "no such scenario"},
			[]string{`no scenarios selected (run "no such scenario", in 1 bed)`, "bedrun list"}},
		{[]string{"genesis", "--features", dir, "--run", "change", "--tags", "~@reload"},
			[]string{`no scenarios selected (tags "~@reload", run "change", in 1 bed)`}},
	} {
		f := &fakeBind{}
		code, _, errOut := bedrun(t, f, tc.args...)
		if code != exitUsage {
			t.Errorf("bedrun %q: expected exit 2, got %d", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("bedrun %q: expected stderr to say %q, got %s", tc.args, w, errOut)
			}
		}
		if f.bound {
			t.Errorf("bedrun %q: expected the input refused before the steps were bound (nothing raised)", tc.args)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"genesis", "-h"}} {
		code, out, _ := bedrun(t, nil, args...)
		if code != exitPass || !strings.Contains(out, "Usage:") || !regexp.MustCompile(`\n  1\s+genesis\s+a mesh raised`).MatchString(out) {
			t.Errorf("bedrun %q: expected usage with the beds, got %d", args, code)
		}
	}
}

func TestSignals(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	exited := make(chan int, 1)
	var errOut bytes.Buffer
	go onSignals(sigs, cancel, func(code int) { exited <- code }, &errOut)

	sigs <- os.Interrupt
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errInterrupted) {
		t.Fatalf("expected the first signal to cancel the run as interrupted, got %v", context.Cause(ctx))
	}
	select {
	case code := <-exited:
		t.Fatalf("expected no exit at the first signal, got %d", code)
	default:
	}
	sigs <- os.Interrupt
	if code := <-exited; code != exitInterrupted {
		t.Fatalf("expected exit %d at the second signal, got %d", exitInterrupted, code)
	}
}

// TestRerunSelectsTheFailedRows: the printed rerun command runs exactly the rows of an
// outline that failed, not the whole outline.
func TestRerunSelectsTheFailedRows(t *testing.T) {
	dir := featuresDir(t, `Feature: Genesis
  Scenario Outline: A user is refused
    Given a step <outcome>
    Examples:
      | outcome | user   |
      | passes  | sensor |
      | fails   | logger |
      | passes  | host   |
`)
	var out, errOut bytes.Buffer
	bind := (&fakeBind{}).bind
	code := run(context.Background(), []string{"genesis", "--features", dir}, env{stdout: &out, stderr: &errOut, bind: bind})
	if code != exitFail || !strings.Contains(out.String(), "FAIL genesis: 2 passed, 1 failed of 3 scenarios") {
		t.Fatalf("expected one row of three failed, got %d:\n%s%s", code, out.String(), errOut.String())
	}
	const prefix = "rerun: bedrun genesis --run '"
	i := strings.Index(out.String(), prefix)
	if i < 0 {
		t.Fatalf("expected a rerun hint:\n%s", out.String())
	}
	hint := strings.TrimSuffix(strings.SplitN(out.String()[i+len(prefix):], "\n", 2)[0], "'")
	if want := `^(A user is refused \(fails, logger\))$`; hint != want {
		t.Fatalf("expected the hint %s, got %s", want, hint)
	}
	out.Reset()
	code = run(context.Background(), []string{"genesis", "--features", dir, "--run", hint}, env{stdout: &out, stderr: &errOut, bind: bind})
	if code != exitFail || !strings.Contains(out.String(), "FAIL genesis: 1 failed of 1 scenario") ||
		strings.Contains(out.String(), "(passes, ") {
		t.Fatalf("expected the hint to rerun the failed row alone, got %d:\n%s", code, out.String())
	}
}

// TestAllIsTheReleaseGate: bedrun all runs the beds in step order, stops at the first that is
// not green and names it; its exit status is the gate's answer.
func TestAllIsTheReleaseGate(t *testing.T) {
	const green = "Feature: Green\n  Scenario: green\n    Given a step passes\n"
	const red = "Feature: Red\n  Scenario: red\n    Given a step fails\n"
	for _, tc := range []struct {
		name                                           string
		genesis, adoption, conformity, living, cutover string
		code                                           int
		want                                           []string
	}{
		{"all green", green, green, green, green, green, exitPass, []string{"PASS genesis:", "PASS adoption:", "PASS conformance:", "PASS living:", "PASS cutover:", "PASS 5 beds: 5 passed of 5 scenarios"}},
		{"genesis red", red, green, green, green, green, exitFail, []string{
			"FAIL genesis: 1 failed of 1 scenario",
			"━━ adoption · step 2 · not run: an earlier bed is not green: genesis (step 1)",
			"━━ conformance · step 3 · not run: an earlier bed is not green: genesis (step 1)",
			"━━ living · step 4 · not run: an earlier bed is not green: genesis (step 1)",
			"━━ cutover · step 5 · not run: an earlier bed is not green: genesis (step 1)",
			"FAIL 5 beds: 1 failed, 4 not run of 5 scenarios in ",
			"; stopped at genesis (step 1), not green",
		}},
		{"adoption red", green, red, green, green, green, exitFail, []string{"PASS genesis:", "FAIL adoption: 1 failed of 1 scenario",
			"━━ conformance · step 3 · not run: an earlier bed is not green: adoption (step 2)", "; stopped at adoption (step 2), not green"}},
		{"conformance red", green, green, red, green, green, exitFail, []string{"PASS genesis:", "PASS adoption:", "FAIL conformance: 1 failed of 1 scenario",
			"━━ living · step 4 · not run: an earlier bed is not green: conformance (step 3)", "; stopped at conformance (step 3), not green"}},
		{"living red", green, green, green, red, green, exitFail, []string{"PASS genesis:", "PASS conformance:", "FAIL living: 1 failed of 1 scenario",
			"━━ cutover · step 5 · not run: an earlier bed is not green: living (step 4)", "; stopped at living (step 4), not green"}},
		{"cutover red", green, green, green, green, red, exitFail, []string{"PASS living:", "FAIL cutover: 1 failed of 1 scenario", "; stopped at cutover (step 5), not green"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := featuresDir(t, tc.genesis)
			for file, body := range map[string]string{"2-adoption.feature": tc.adoption, "3-conformance.feature": tc.conformity, "4-living.feature": tc.living, "5-cutover.feature": tc.cutover} {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, out, _ := bedrun(t, nil, "all", "--features", dir)
			if code != tc.code {
				t.Errorf("expected exit %d, got %d", tc.code, code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("expected the progress to say %q", w)
				}
			}
		})
	}
}

// TestInterruptedRun: a run cancelled as a signal does exits 130 and calls nothing failed.
func TestInterruptedRun(t *testing.T) {
	dir := featuresDir(t, "Feature: Genesis\n  Scenario: cut\n    Given a step passes\n    And the run is interrupted\n    Then a step waits\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	bind := func(o stepOptions) (func(*godog.TestSuiteContext), func(*godog.ScenarioContext), func() error) {
		suite, scenario, closer := (&fakeBind{}).bind(o)
		return suite, func(sc *godog.ScenarioContext) {
			scenario(sc)
			sc.Step(`^the run is interrupted$`, func() error { cancel(fmt.Errorf("%w by interrupt", errInterrupted)); return nil })
			sc.Step(`^a step waits$`, func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) })
		}, closer
	}
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"genesis", "--features", dir}, env{stdout: &out, stderr: &errOut, bind: bind})
	t.Log(out.String())
	if code != exitInterrupted {
		t.Fatalf("expected exit %d, got %d", exitInterrupted, code)
	}
	if !strings.Contains(out.String(), "INTERRUPTED genesis: 1 interrupted of 1 scenario") || strings.Contains(out.String(), "FAIL") {
		t.Fatalf("expected the scenario reported interrupted, not failed:\n%s", out.String())
	}
}

// TestFailFastReachesTheSteps: --fail-fast is passed on to the step definitions, which keep
// the failed scenario's cluster.
func TestFailFastReachesTheSteps(t *testing.T) {
	f := &fakeBind{}
	dir := featuresDir(t, genesis)
	code, out, _ := bedrun(t, f, "genesis", "--features", dir, "--fail-fast")
	if code != exitFail || !f.opts.FailFast || !f.opts.steps().FailFast || f.opts.steps().Keep {
		t.Fatalf("expected --fail-fast to reach the steps' options, got %d, %+v", code, f.opts.steps())
	}
	if !strings.Contains(out, "FAIL genesis: 1 passed, 1 failed, 1 not run of 3 scenarios") {
		t.Fatalf("expected the run to stop after the failed scenario:\n%s", out)
	}
}

func TestParallelIsAskedOrDerived(t *testing.T) {
	dir := featuresDir(t, genesis)
	code, out, _ := bedrun(t, nil, "genesis", "--features", dir, "--parallel", "2", "--run", "streams")
	if code != exitPass || !strings.Contains(out, "up to 2 scenarios of a bed at once (--parallel") {
		t.Errorf("expected --parallel 2 said at start, got %d:\n%s", code, out)
	}
	_, out, _ = bedrun(t, nil, "genesis", "--features", dir, "--run", "streams")
	if n, why := beds.DefaultParallel(); n > 1 && !strings.Contains(out, fmt.Sprintf("up to %d scenarios of a bed at once (%s;", n, why)) {
		t.Errorf("expected the default, %d (%s), said at start, got:\n%s", n, why, out)
	}
	if code, _, errOut := bedrun(t, nil, "genesis", "--features", dir, "--parallel", "-1"); code != exitUsage || !strings.Contains(errOut, "1 or more") {
		t.Errorf("expected --parallel -1 refused as usage, got %d: %s", code, errOut)
	}
}

func TestListShowsTheLastRunsTimes(t *testing.T) {
	dir := featuresDir(t, genesis)
	report := t.TempDir()
	if code, _, _ := bedrun(t, nil, "genesis", "--features", dir, "--run", "streams", "--report", report); code != exitPass {
		t.Fatalf("expected the run to pass, got %d", code)
	}
	code, out, _ := bedrun(t, nil, "list", "genesis", "--features", dir, "--report", report)
	if code != exitPass || !strings.Contains(out, "last run: ") || !regexp.MustCompile(`:3 +\d+\.\ds  The streams exist`).MatchString(out) {
		t.Errorf("expected the last run's times of the bed and of its scenario, got %d:\n%s", code, out)
	}
	if code, _, errOut := bedrun(t, nil, "list", "--features", dir, "--report", t.TempDir()); code != exitUsage || !strings.Contains(errOut, "last run's times") {
		t.Errorf("expected a report directory without times refused, got %d: %s", code, errOut)
	}
}
