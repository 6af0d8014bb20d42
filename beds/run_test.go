package beds

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cucumber/godog"
)

// toy is a feature whose scenarios pass, fail, or use steps nobody defined.
const toy = `Feature: Toy
  Scenario: it passes
    Given a mesh
    When the reload is measured
    Then all is well

  @bad
  Scenario: it fails
    Given a mesh
    Then it fails with "expected 3 streams, got 2"
    And all is well

  @bad @undefined
  Scenario: it is undefined
    Given a mesh
    Then nobody defined this step
`

// fakeSteps are the step definitions of the tests; calls counts the steps that ran.
type fakeSteps struct {
	calls   atomic.Int64
	release chan struct{} // a step "it hangs" blocks on it, ignoring its context
	// met counts the scenarios that reached "the N scenarios meet".
	met atomic.Int64
}

func (f *fakeSteps) scenario(sc *godog.ScenarioContext) {
	sc.Step(`^a mesh$`, func(ctx context.Context) error {
		f.calls.Add(1)
		return nil
	})
	sc.Step(`^the reload is measured$`, func(ctx context.Context) error {
		f.calls.Add(1)
		Measure(ctx, "reload latency", 812*time.Millisecond)
		Logf(ctx, "config written")
		return nil
	})
	sc.Step(`^all is well$`, func() error { f.calls.Add(1); return nil })
	sc.Step(`^it fails with "([^"]*)"$`, func(msg string) error { f.calls.Add(1); return errors.New(msg) })
	sc.Step(`^the docker engine is gone$`, func() error {
		return fmt.Errorf("start nats: %w: no docker", ErrInfrastructure)
	})
	sc.Step(`^it keeps "([^"]*)" as evidence$`, func(ctx context.Context, text string) error {
		dir := ArtifactDir(ctx)
		if dir == "" {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "nats.log"), []byte(text), 0o644)
	})
	sc.Step(`^it is pending$`, func() error { return godog.ErrPending })
	sc.Step(`^it (?:is|matches) twice$`, func() error { return nil })
	sc.Step(`^it is twice$`, func() error { return nil })
	sc.Step(`^it waits for its context$`, func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	sc.Step(`^it hangs$`, func() error { <-f.release; return nil })
	// A rendezvous: it passes only when n scenarios are in it at the same time.
	sc.Step(`^the (\d+) scenarios meet$`, func(ctx context.Context, n int) error {
		f.met.Add(1)
		deadline := time.Now().Add(10 * time.Second)
		for f.met.Load() < int64(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("expected %d scenarios at once, %d came", n, f.met.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	})
}

// features writes files into a temp features directory and returns it.
func features(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func toyBed(name string, step int) Bed {
	return Bed{Name: name, Step: step, Owner: "bus", Summary: "toy", Features: []string{name + ".feature"}, Timeout: time.Minute}
}

// run runs beds over files with fake steps and returns the result, the progress and the error.
func run(t *testing.T, files map[string]string, o Options) (Result, string, error) {
	t.Helper()
	var out bytes.Buffer
	f := &fakeSteps{release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	o.FeaturesDir = features(t, files)
	o.Out = &out
	o.Scenario = f.scenario
	res, err := Run(context.Background(), o)
	t.Log("\n" + out.String())
	return res, out.String(), err
}

func statuses(r Result) map[string]Status {
	m := map[string]Status{}
	for _, b := range r.Beds {
		for _, s := range b.Scenarios {
			m[s.Name] = s.Status
		}
	}
	return m
}

func expectStatuses(t *testing.T, r Result, want map[string]Status) {
	t.Helper()
	got := statuses(r)
	if len(got) != len(want) {
		t.Errorf("expected %d scenarios, got %d: %v", len(want), len(got), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("scenario %q: expected %s, got %s", name, w, got[name])
		}
	}
}

func TestRunStrictAndReports(t *testing.T) {
	report := t.TempDir()
	res, out, err := run(t, map[string]string{"toy.feature": toy}, Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"it passes": Passed, "it fails": Failed, "it is undefined": Undefined})
	if res.OK() {
		t.Fatal("expected a run with a failed and an undefined scenario not OK")
	}
	for _, want := range []string{
		"▶ toy › it passes",
		"  ✓ Given a mesh (",
		"    ⏱ reload latency = 812ms",
		"    · config written",
		"  ✗ Then it fails with \"expected 3 streams, got 2\" (",
		"      expected 3 streams, got 2",
		"  - And all is well (skipped)",
		"  ? Then nobody defined this step (undefined",
		"FAIL toy: 1 passed, 1 failed, 1 undefined of 3 scenarios in",
		"  ⏱ reload latency = 812ms  (it passes)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected progress to contain %q", want)
		}
	}

	if i, j := strings.Index(out, "  - And all is well (skipped)"), strings.Index(out, "  ✗ FAILED"); i < 0 || j < i {
		t.Errorf("expected the skipped steps shown before the scenario's verdict")
	}

	// junit.xml: our counts, the failure's message, the measurement as a property.
	var ju junitSuites
	readXML(t, filepath.Join(report, JUnitFile), &ju)
	if ju.Tests != 3 || ju.Failures != 1 || ju.Errors != 1 || ju.Skipped != 0 || len(ju.Suites) != 1 {
		t.Fatalf("junit: expected 3 tests, 1 failure, 1 error in 1 suite, got %+v", ju)
	}
	cases := map[string]junitCase{}
	for _, c := range ju.Suites[0].Cases {
		cases[c.Name] = c
	}
	if f := cases["it fails"].Failure; f == nil || !strings.Contains(f.Message, "expected 3 streams, got 2") {
		t.Errorf("junit: expected the failure message, got %+v", f)
	}
	if e := cases["it is undefined"].Error; e == nil || e.Type != "undefined" {
		t.Errorf("junit: expected an undefined error, got %+v", e)
	}
	if p := cases["it passes"].Properties; p == nil || len(p.List) != 1 || p.List[0] != (junitProperty{"reload latency", "812ms"}) {
		t.Errorf("junit: expected the measurement as a property, got %+v", p)
	}

	// cucumber.json: godog's view, merged; the measurement embedded in its step.
	var cuke []struct {
		Elements []struct {
			Name  string `json:"name"`
			Steps []struct {
				Name   string `json:"name"`
				Result struct {
					Status string `json:"status"`
				} `json:"result"`
				Embeddings []struct {
					Data string `json:"data"`
				} `json:"embeddings"`
			} `json:"steps"`
		} `json:"elements"`
	}
	readJSON(t, filepath.Join(report, CucumberFile), &cuke)
	if len(cuke) != 1 || len(cuke[0].Elements) != 3 {
		t.Fatalf("cucumber: expected 1 feature of 3 scenarios, got %+v", cuke)
	}
	embedded := false
	for _, st := range cuke[0].Elements[0].Steps {
		embedded = embedded || len(st.Embeddings) == 1
	}
	if !embedded {
		t.Errorf("cucumber: expected the measurement embedded in a step, got %+v", cuke[0].Elements[0])
	}

	var tm struct {
		Beds         []map[string]any `json:"beds"`
		Measurements []map[string]any `json:"measurements"`
	}
	readJSON(t, filepath.Join(report, MeasurementsFile), &tm)
	ms := tm.Measurements
	if len(ms) != 1 || ms[0]["name"] != "reload latency" || ms[0]["value"] != "812ms" || ms[0]["seconds"] != 0.812 ||
		ms[0]["bed"] != "toy" || !strings.HasSuffix(ms[0]["where"].(string), "/toy.feature:2") || ms[0]["step"] != "When the reload is measured" {
		t.Fatalf("measurements.json: expected the reload latency of toy.feature:2, got %v", ms)
	}
}

func TestRunAllPassIsOK(t *testing.T) {
	res, out, err := run(t, map[string]string{"toy.feature": toy}, Options{Beds: []Bed{toyBed("toy", 1)}, Tags: "~@bad"})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"it passes": Passed})
	if !res.OK() {
		t.Fatal("expected a run whose only scenario passed OK")
	}
	if !strings.Contains(out, "PASS toy: 1 passed of 1 scenario") {
		t.Errorf("expected a PASS summary")
	}
}

func TestRunTags(t *testing.T) {
	res, _, err := run(t, map[string]string{"toy.feature": toy}, Options{Beds: []Bed{toyBed("toy", 1)}, Tags: "@bad && ~@undefined"})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"it fails": Failed})

	_, _, err = run(t, map[string]string{"toy.feature": toy}, Options{Beds: []Bed{toyBed("toy", 1)}, Tags: "@nothing"})
	if !errors.Is(err, ErrNoScenarios) {
		t.Fatalf("expected ErrNoScenarios when the tags select nothing, got %v", err)
	}
}

func TestRunMatch(t *testing.T) {
	outline := toy + `
  Scenario Outline: rows
    Given it fails with "<msg>"
    Examples:
      | msg    |
      | forged |
      | other  |
`
	res, _, err := run(t, map[string]string{"toy.feature": outline}, Options{Beds: []Bed{toyBed("toy", 1)}, Match: regexp.MustCompile("fails")})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"it fails": Failed})

	// godog selects an outline by its own line; the runner hides the other rows from it, so
	// a match on one row runs that row alone, with the line numbers of the file.
	var ran []string
	dir := features(t, map[string]string{"toy.feature": outline})
	res, err = Run(context.Background(), Options{
		Beds: []Bed{toyBed("toy", 1)}, FeaturesDir: dir, Match: regexp.MustCompile(`^rows \(forged\)$`),
		Scenario: func(sc *godog.ScenarioContext) {
			sc.Step(`^it fails with "([^"]*)"$`, func(msg string) error { ran = append(ran, msg); return errors.New(msg) })
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Counts(); c[Failed] != 1 || c.Total() != 1 {
		t.Fatalf("expected the one row selected, and only it, run, got %v", c)
	}
	if got := res.Beds[0].Scenarios[0]; got.Title() != "rows (forged)" || got.Where() != "toy.feature:22" || len(got.Steps) != 1 {
		t.Fatalf("expected the row at toy.feature:22 with its step, got %s at %s, %d steps", got.Title(), got.Where(), len(got.Steps))
	}
	if strings.Join(ran, ",") != "forged" {
		t.Fatalf("expected only the forged row's step to run, got %q", ran)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "toy.feature")); string(b) != outline {
		t.Fatalf("expected the feature file untouched, got\n%s", b)
	}

	// Two rows of one outline and a scenario of its own: all three, nothing else.
	res, _, err = run(t, map[string]string{"toy.feature": outline}, Options{Beds: []Bed{toyBed("toy", 1)}, Match: regexp.MustCompile(`forged|other|passes`)})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Counts(); c[Failed] != 2 || c[Passed] != 1 || c.Total() != 3 {
		t.Fatalf("expected both rows and the passing scenario, got %v", c)
	}

	_, _, err = run(t, map[string]string{"toy.feature": outline}, Options{Beds: []Bed{toyBed("toy", 1)}, Match: regexp.MustCompile("nothing")})
	if !errors.Is(err, ErrNoScenarios) || !strings.Contains(err.Error(), `run "nothing"`) {
		t.Fatalf("expected ErrNoScenarios naming the --run, got %v", err)
	}
}

func TestSelectOneRow(t *testing.T) {
	dir := features(t, map[string]string{"c.feature": claims})
	plan, err := Scenarios(os.DirFS(dir), toyBed("c", 1), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range Select(plan, regexp.MustCompile(`\(full\)`)) {
		got = append(got, s.Where())
	}
	if strings.Join(got, " ") != "c.feature:12" {
		t.Fatalf("expected the full row of the floor alone, got %v", got)
	}
}

func TestHideRowsKeepsLines(t *testing.T) {
	base := features(t, map[string]string{"c.feature": strings.ReplaceAll(claims, "\n", "\r\n")})
	fsys, err := hideRows(os.DirFS(base), map[string][]int{"c.feature": {13}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "c.feature")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\r\n")
	if want := len(strings.Split(claims, "\n")); len(lines) != want || lines[12] != "#" || strings.TrimSpace(lines[11]) != "| full           |" {
		t.Fatalf("expected line 13 alone a comment among %d lines, got %d:\n%s", want, len(lines), b)
	}
	if _, err := hideRows(os.DirFS(base), map[string][]int{"c.feature": {2}}); err == nil {
		t.Fatal("expected a line that is not a table row refused")
	}
}

func TestRunFailFast(t *testing.T) {
	second := strings.Replace(toy, "Feature: Toy", "Feature: Second", 1)
	report := t.TempDir()
	res, _, err := run(t, map[string]string{"toy.feature": toy, "second.feature": second}, Options{
		Beds: []Bed{toyBed("toy", 1), toyBed("second", 2)}, FailFast: true, ReportDir: report,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Beds[0].Counts(); got[Passed] != 1 || got[Failed] != 1 || got[NotRun] != 1 {
		t.Fatalf("expected toy to stop after its failure, got %v", got)
	}
	for _, s := range res.Beds[0].Scenarios[2:] {
		if !errors.Is(s.Err, errFailFast) {
			t.Errorf("expected %q not run for fail-fast, got %v", s.Name, s.Err)
		}
	}
	if got := res.Beds[1].Counts(); got[NotRun] != 3 {
		t.Fatalf("expected the second bed not run at all, got %v", got)
	}
	var ju junitSuites
	readXML(t, filepath.Join(report, JUnitFile), &ju)
	if ju.Tests != 6 || ju.Failures != 1 || ju.Skipped != 4 {
		t.Fatalf("junit: expected 6 tests, 1 failure, 4 skipped, got %+v", ju)
	}
	// godog's own cucumber formatter panics here (v0.16); ours lists the scenarios not run
	// with skipped steps.
	var cuke []struct {
		Name     string `json:"name"`
		Elements []struct {
			Steps []struct {
				Result struct {
					Status string `json:"status"`
				} `json:"result"`
			} `json:"steps"`
		} `json:"elements"`
	}
	readJSON(t, filepath.Join(report, CucumberFile), &cuke)
	if len(cuke) != 2 || cuke[1].Name != "Second" || len(cuke[1].Elements) != 3 {
		t.Fatalf("cucumber: expected both features with 3 scenarios each, got %+v", cuke)
	}
	if st := cuke[1].Elements[0].Steps; len(st) != 3 || st[0].Result.Status != "skipped" {
		t.Fatalf("cucumber: expected the steps of a scenario not run skipped, got %+v", st)
	}

	// Without a report directory too: godog's StopOnFailure is what stops the bed.
	res, _, err = run(t, map[string]string{"toy.feature": toy}, Options{Beds: []Bed{toyBed("toy", 1)}, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"it passes": Passed, "it fails": Failed, "it is undefined": NotRun})
}

// interrupting runs beds over files with fake steps and a step "the run is interrupted"
// that cancels the run's context, as bedrun does on SIGINT.
func interrupting(t *testing.T, files map[string]string, o Options, errStop error) (Result, string, *fakeSteps) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	f := &fakeSteps{}
	var out bytes.Buffer
	o.FeaturesDir, o.Out = features(t, files), &out
	bind := o.Scenario
	o.Scenario = func(sc *godog.ScenarioContext) {
		f.scenario(sc)
		sc.Step(`^the run is interrupted$`, func() error { cancel(errStop); return nil })
		if bind != nil {
			bind(sc)
		}
	}
	res, err := Run(ctx, o)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String(), f
}

// TestRunStopsAtTheFirstBedNotGreen: beds run in step order, and the run stops at the first
// that is not green, naming it; a bed none of whose scenarios is selected is green.
func TestRunStopsAtTheFirstBedNotGreen(t *testing.T) {
	third := strings.Replace(toy, "Feature: Toy", "Feature: Third", 1) + "\n  @third\n  Scenario: third's own\n    Given a mesh\n"
	files := map[string]string{"toy.feature": toy, "third.feature": third, "green.feature": "Feature: Green\n  Scenario: green\n    Given a mesh\n"}
	res, out, err := run(t, files, Options{Beds: []Bed{toyBed("green", 1), toyBed("toy", 2), toyBed("third", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Beds[1].Counts(); got[Passed] != 1 || got[Failed] != 1 || got[Undefined] != 1 {
		t.Fatalf("expected toy run whole (no fail-fast), got %v", got)
	}
	if got := res.Beds[2].Counts(); got[NotRun] != 4 {
		t.Fatalf("expected the bed after toy not run, got %v", got)
	}
	for _, s := range res.Beds[2].Scenarios {
		if !errors.Is(s.Err, errNotGreen) || !strings.Contains(s.Err.Error(), "toy (step 2)") {
			t.Errorf("expected %q not run because toy is not green, got %v", s.Name, s.Err)
		}
	}
	if b, ok := res.Stopped(); !ok || b.Bed.Name != "toy" {
		t.Fatalf("expected the run stopped at toy, got %v %v", b.Bed.Name, ok)
	}
	for _, want := range []string{
		"━━ third · step 3 · not run: an earlier bed is not green: toy (step 2)",
		"FAIL 3 beds: 2 passed, 1 failed, 1 undefined, 4 not run of 8 scenarios in ",
		"; stopped at toy (step 2), not green",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected progress to contain %q", want)
		}
	}

	// A bed with no scenario selected does not stop the run.
	res, _, err = run(t, files, Options{Beds: []Bed{toyBed("green", 1), toyBed("toy", 2), toyBed("third", 3)}, Tags: "@third"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Beds[2].Counts(); got[Passed] != 1 || got.Total() != 1 || !res.OK() {
		t.Fatalf("expected the third bed run after two with nothing selected, got %v", got)
	}
}

func TestRunInterrupted(t *testing.T) {
	feature := `Feature: Interrupted
  Scenario: interrupted
    Given the run is interrupted
    Then it waits for its context
  Scenario: after
    Given a mesh
`
	errStop := errors.New("interrupted by test")
	report := t.TempDir()
	res, out, f := interrupting(t, map[string]string{"a.feature": feature, "b.feature": toy},
		Options{Beds: []Bed{toyBed("a", 1), toyBed("b", 2)}, ReportDir: report}, errStop)
	expectStatuses(t, res, map[string]Status{"interrupted": Interrupted, "after": NotRun,
		"it passes": NotRun, "it fails": NotRun, "it is undefined": NotRun})
	for _, b := range res.Beds {
		for _, s := range b.Scenarios {
			if !errors.Is(s.Err, errStop) {
				t.Errorf("scenario %q: expected the interrupt as its cause, got %v", s.Name, s.Err)
			}
		}
	}
	if f.calls.Load() != 0 {
		t.Errorf("expected no step of a scenario after the interrupt to run, got %d", f.calls.Load())
	}
	if !res.Interrupted() || res.OK() {
		t.Errorf("expected the run interrupted and not OK")
	}
	if b, ok := res.Stopped(); ok {
		t.Errorf("expected an interrupted run not to name a bed that is not green, got %s", b.Bed.Name)
	}
	for _, want := range []string{
		"  ! Then it waits for its context (interrupted after ",
		"  ! INTERRUPTED in ",
		"INTERRUPTED a: 1 interrupted, 1 not run of 2 scenarios in ",
		"  ! interrupted ",
		"━━ b · step 2 · not run: interrupted by test",
		"INTERRUPTED 2 beds: 1 interrupted, 4 not run of 5 scenarios in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected progress to contain %q", want)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("expected nothing called failed in an interrupted run")
	}

	var ju junitSuites
	readXML(t, filepath.Join(report, JUnitFile), &ju)
	if ju.Failures != 0 || ju.Errors != 0 || ju.Skipped != 5 {
		t.Fatalf("junit: expected no failure, no error, 5 skipped, got %+v", ju)
	}
	if sk := ju.Suites[0].Cases[0].Skipped; sk == nil || sk.Type != "interrupted" || !strings.HasPrefix(sk.Message, "interrupted: interrupted by test") {
		t.Fatalf("junit: expected the interrupted scenario skipped as interrupted, got %+v", sk)
	}
	var cuke []struct {
		Elements []struct {
			Steps []struct {
				Result struct {
					Status string `json:"status"`
					Error  string `json:"error_message"`
				} `json:"result"`
			} `json:"steps"`
		} `json:"elements"`
	}
	readJSON(t, filepath.Join(report, CucumberFile), &cuke)
	if st := cuke[0].Elements[0].Steps; st[0].Result.Status != "passed" || st[1].Result.Status != "skipped" ||
		!strings.HasPrefix(st[1].Result.Error, "interrupted: ") {
		t.Fatalf("cucumber: expected the cut step skipped, saying interrupted, got %+v", st)
	}
}

// TestRunInterruptedKeepsEarlierFailures: what failed before the interrupt is failed, and
// the bed with it.
func TestRunInterruptedKeepsEarlierFailures(t *testing.T) {
	feature := `Feature: Mixed
  Scenario: fails first
    Given it fails with "expected 3 streams, got 2"
  Scenario: interrupted
    Given the run is interrupted
    Then it waits for its context
`
	res, out, _ := interrupting(t, map[string]string{"mixed.feature": feature}, Options{Beds: []Bed{toyBed("mixed", 1)}}, errors.New("interrupted by test"))
	expectStatuses(t, res, map[string]Status{"fails first": Failed, "interrupted": Interrupted})
	if res.Interrupted() || !strings.Contains(out, "FAIL mixed: 1 failed, 1 interrupted of 2 scenarios") {
		t.Fatalf("expected a failure before the interrupt to fail the bed")
	}
}

// TestRunInterruptedInTeardown: a teardown failing because the run was interrupted is not a
// failure of the product.
func TestRunInterruptedInTeardown(t *testing.T) {
	feature := "Feature: Teardown\n  Scenario: cut in teardown\n    Given the run is interrupted\n"
	res, _, _ := interrupting(t, map[string]string{"td.feature": feature}, Options{
		Beds: []Bed{toyBed("td", 1)},
		Scenario: func(sc *godog.ScenarioContext) {
			sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
				return ctx, fmt.Errorf("remove containers: %w", context.Cause(ctx))
			})
		},
	}, errors.New("interrupted by test"))
	expectStatuses(t, res, map[string]Status{"cut in teardown": Interrupted})
	if err := res.Beds[0].Scenarios[0].Err; !strings.HasPrefix(err.Error(), "interrupted by test; remove containers: ") {
		t.Fatalf("expected the interrupt named first, then the teardown's error, got %v", err)
	}
}

// TestInterruptedInHooks: an After hook can tell an interrupted run from a bed that timed
// out and from one still running.
func TestInterruptedInHooks(t *testing.T) {
	feature := "Feature: Cut\n  Scenario: cut\n    Given the run is interrupted\n"
	var seen []bool
	after := func(sc *godog.ScenarioContext) {
		sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
			seen = append(seen, RunInterrupted(ctx))
			return ctx, nil
		})
	}
	interrupting(t, map[string]string{"cut.feature": feature}, Options{Beds: []Bed{toyBed("cut", 1)}, Scenario: after}, errors.New("interrupted by test"))
	slow := toyBed("slow", 1)
	slow.Timeout = 50 * time.Millisecond
	interrupting(t, map[string]string{"slow.feature": "Feature: Slow\n  Scenario: slow\n    Given it waits for its context\n"},
		Options{Beds: []Bed{slow}, Scenario: after}, nil)
	if fmt.Sprint(seen) != "[true false]" {
		t.Fatalf("expected the hook to see the interrupt and then a timeout not as one, got %v", seen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if RunInterrupted(ctx) {
		t.Fatal("expected a live context outside a run not interrupted")
	}
	cancel()
	if !RunInterrupted(ctx) {
		t.Fatal("expected an ended context outside a run interrupted")
	}
}

func TestRunInfrastructureSentinel(t *testing.T) {
	errDocker := errors.New("docker unreachable")
	feature := "Feature: Infra\n  Scenario: no docker\n    Given docker is gone\n"
	var out bytes.Buffer
	res, err := Run(context.Background(), Options{
		Beds: []Bed{toyBed("infra", 1)}, FeaturesDir: features(t, map[string]string{"infra.feature": feature}), Out: &out,
		Infrastructure: []error{errDocker},
		Scenario: func(sc *godog.ScenarioContext) {
			sc.Step(`^docker is gone$`, func() error { return fmt.Errorf("raise cluster: %w", errDocker) })
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"no docker": Errored})
}

func TestRegisteredBedsParse(t *testing.T) {
	// The registry against the repository's features: every file exists and parses.
	dir := filepath.Join("..", "features")
	set, err := Load(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range set {
		s, err := Scenarios(os.DirFS(dir), b, "")
		if err != nil || len(s) == 0 {
			t.Errorf("bed %s: expected scenarios in %v, got %d, %v", b.Name, b.Features, len(s), err)
		}
	}
}

func TestRunStrictStatuses(t *testing.T) {
	feature := `Feature: Strict
  Scenario: ambiguous
    Given it is twice
  Scenario: pending
    Given it is pending
  Scenario: infrastructure
    Given the docker engine is gone
  Scenario: empty
`
	res, _, err := run(t, map[string]string{"strict.feature": feature}, Options{Beds: []Bed{toyBed("strict", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"ambiguous": Ambiguous, "pending": Pending, "infrastructure": Errored, "empty": Undefined})
	if res.OK() {
		t.Fatal("expected ambiguous, pending and empty scenarios to fail the run")
	}
}

func TestRunHooksAndTeardown(t *testing.T) {
	feature := "Feature: Hooks\n  Scenario: torn down badly\n    Given a mesh\n"
	var seen string
	report := t.TempDir()
	_, _, err := run(t, map[string]string{"hooks.feature": feature}, Options{
		Beds:      []Bed{toyBed("hooks", 1)},
		ReportDir: report,
		Suite: func(sc *godog.TestSuiteContext) {
			sc.ScenarioContext().Before(func(ctx context.Context, _ *godog.Scenario) (context.Context, error) {
				// The runner's hook ran first: the scenario is known to the step API.
				b, s, ok := Current(ctx)
				seen = fmt.Sprint(b.Name, " ", s.Where(), " ", ok, " ", ArtifactDir(ctx))
				return ctx, nil
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "hooks hooks.feature:2 true " + filepath.Join(report, "hooks", "2-torn-down-badly")
	if seen != want {
		t.Fatalf("expected a suite-level Before hook to see %q, got %q", want, seen)
	}

	// A failing After hook (teardown) fails a scenario whose steps passed.
	res, out, err := run(t, map[string]string{"hooks.feature": feature}, Options{
		Beds: []Bed{toyBed("hooks", 1)},
		Suite: func(sc *godog.TestSuiteContext) {
			sc.ScenarioContext().After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
				return ctx, errors.New("remove container: still running")
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"torn down badly": Failed})
	if !strings.Contains(out, "  ✗ after scenario:") || !strings.Contains(out, "remove container: still running") {
		t.Fatalf("expected the teardown failure printed, got\n%s", out)
	}
}

func TestRunTimeout(t *testing.T) {
	feature := `Feature: Slow
  Scenario: waits
    Given it waits for its context
  Scenario: never starts
    Given a mesh
`
	b := toyBed("slow", 1)
	b.Timeout = 200 * time.Millisecond
	res, _, err := run(t, map[string]string{"slow.feature": feature}, Options{Beds: []Bed{b}})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"waits": Failed, "never starts": NotRun})
	for _, s := range res.Beds[0].Scenarios {
		if !errors.Is(s.Err, ErrTimeout) {
			t.Errorf("scenario %q: expected ErrTimeout, got %v", s.Name, s.Err)
		}
	}
	if !errors.Is(res.Beds[0].Err, ErrTimeout) {
		t.Errorf("expected the bed to report its timeout, got %v", res.Beds[0].Err)
	}
}

func TestRunHeartbeat(t *testing.T) {
	feature := "Feature: Long\n  Scenario: long\n    Given it waits for its context\n"
	b := toyBed("long", 1)
	b.Timeout = 300 * time.Millisecond
	_, out, err := run(t, map[string]string{"long.feature": feature}, Options{Beds: []Bed{b}, Heartbeat: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "    ⋯ still running: Given it waits for its context (") {
		t.Fatalf("expected a long step reported still running")
	}
}

func TestRunHung(t *testing.T) {
	feature := "Feature: Hung\n  Scenario: hangs\n    Given it hangs\n"
	b := toyBed("hung", 1)
	b.Timeout = 100 * time.Millisecond
	report := t.TempDir()
	res, _, err := run(t, map[string]string{"hung.feature": feature}, Options{Beds: []Bed{b}, Grace: 100 * time.Millisecond, ReportDir: report})
	if !errors.Is(err, ErrHung) {
		t.Fatalf("expected ErrHung, got %v", err)
	}
	expectStatuses(t, res, map[string]Status{"hangs": Failed})
	dump, rerr := os.ReadFile(filepath.Join(report, "hung", "goroutines.txt"))
	if rerr != nil || !bytes.Contains(dump, []byte("goroutine")) {
		t.Fatalf("expected a goroutine dump, got %v", rerr)
	}
	if _, err := os.Stat(filepath.Join(report, JUnitFile)); err != nil {
		t.Fatalf("expected junit.xml written even for a hung bed: %v", err)
	}
}

func TestRunRefusesBrokenFeatureBeforeRunning(t *testing.T) {
	_, out, err := run(t, map[string]string{"toy.feature": toy, "broken.feature": "this is not gherkin\nFeature: x\n"},
		Options{Beds: []Bed{toyBed("toy", 1), toyBed("broken", 2)}})
	if err == nil || !strings.Contains(err.Error(), "broken.feature") {
		t.Fatalf("expected the parse error of broken.feature, got %v", err)
	}
	if strings.Contains(out, "▶") {
		t.Fatalf("expected nothing run before the parse error, got\n%s", out)
	}
}

func readXML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

func TestPrinterRedrawsRunningStep(t *testing.T) {
	var b bytes.Buffer
	p := &printer{out: &b, color: true}
	p.running("Given a mesh")
	p.note("nats up")
	p.step(StepResult{Text: "Given a mesh", Status: Passed, Elapsed: 1200 * time.Millisecond})
	open := ansiDim + "  ⋯ Given a mesh" + ansiReset
	want := open + clearLine + ansiDim + "    · " + ansiReset + "nats up\n" + open +
		clearLine + "  " + ansiGreen + "✓" + ansiReset + " Given a mesh" + ansiDim + " (1.2s)" + ansiReset + "\n"
	if b.String() != want {
		t.Fatalf("expected\n%q\ngot\n%q", want, b.String())
	}
}

func TestPrecise(t *testing.T) {
	for d, want := range map[time.Duration]string{
		864838760 * time.Nanosecond: "865ms",
		1234567 * time.Microsecond:  "1.23s",
		12345678:                    "12.3ms",
		999:                         "999ns",
		90 * time.Second:            "1m30s",
	} {
		if got := precise(d); got != want {
			t.Errorf("precise(%d): expected %s, got %s", d, want, got)
		}
	}
}

func TestConsoleIndentsTheStepsLines(t *testing.T) {
	var b bytes.Buffer
	c := NewConsole(&b, false)
	feature := "Feature: Console\n  Scenario: narrated\n    Given the harness talks\n"
	_, err := Run(context.Background(), Options{
		Beds: []Bed{toyBed("console", 1)}, FeaturesDir: features(t, map[string]string{"console.feature": feature}), Out: c,
		Scenario: func(sc *godog.ScenarioContext) {
			sc.Step(`^the harness talks$`, func() error {
				fmt.Fprint(c, "raising cluster")
				fmt.Fprint(c, " run=abc\nnats up\n")
				return nil
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "  ⋯ Given the harness talks\n    · raising cluster run=abc\n    · nats up\n  ✓ Given the harness talks ("
	if !strings.Contains(b.String(), want) {
		t.Fatalf("expected the steps' lines indented under their step:\n%s", b.String())
	}
}

// meet is a feature of three scenarios that pass only if they run at the same time, and one
// that fails.
const meet = `Feature: Meet
  Scenario: first
    Given a mesh
    Then the 3 scenarios meet

  Scenario: second
    Given a mesh
    Then the 3 scenarios meet

  Scenario: broken
    Given a mesh
    Then it fails with "expected 3 streams, got 2"

  Scenario: third
    Given a mesh
    Then the 3 scenarios meet
`

func TestParallelRunsScenariosAtOnceAndReportsThemInTheFeaturesOrder(t *testing.T) {
	res, out, err := run(t, map[string]string{"meet.feature": meet}, Options{Beds: []Bed{toyBed("meet", 1)}, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	expectStatuses(t, res, map[string]Status{"first": Passed, "second": Passed, "third": Passed, "broken": Failed})
	var names []string
	for _, s := range res.Beds[0].Scenarios {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "first,second,broken,third" {
		t.Errorf("expected the results in the features' order, got %s", got)
	}
	if !strings.Contains(out, "4 scenarios · 4 at once") {
		t.Errorf("expected the bed's line to say how many run at once, got:\n%s", out)
	}
	// A scenario that passed is a line at its start and one at its end; one that failed shows
	// its steps, under its end.
	if strings.Contains(out, "Then the 3 scenarios meet") {
		t.Errorf("expected no step of a passing scenario in the progress, got:\n%s", out)
	}
	end := strings.Index(out, "FAILED in")
	step := strings.Index(out, `✗ Then it fails with "expected 3 streams, got 2"`)
	if end < 0 || step < end || !strings.Contains(out[:end], "meet › broken") && !strings.Contains(out[end:step], "meet › broken") {
		t.Errorf("expected the failed scenario's end line naming it, then its steps, got:\n%s", out)
	}
	tm := res.Beds[0].Time()
	if tm.Scenarios < tm.Wall {
		t.Errorf("expected the scenarios' summed time (%s) past the bed's wall time (%s) when they ran at once", tm.Scenarios, tm.Wall)
	}
}

func TestTheTimingsSayWhereEachBedsTimeWent(t *testing.T) {
	report := t.TempDir()
	o := Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report}
	f := &fakeSteps{release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	o.Scenario = func(sc *godog.ScenarioContext) {
		f.scenario(sc)
		sc.Step(`^a cluster is raised$`, func(ctx context.Context) error {
			SpentRaising(ctx, 3*time.Second)
			return nil
		})
		sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
			ClusterReset(ctx) // as the steps' teardown does
			return ctx, err
		})
	}
	o.FeaturesDir = features(t, map[string]string{"toy.feature": `Feature: Toy
  Scenario: it raises
    Given a cluster is raised
    Then all is well
`})
	var out bytes.Buffer
	o.Out = &out
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("expected the toy to pass:\n%s", out.String())
	}
	tm, err := ReadTimings(report)
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Beds) != 1 || len(tm.Beds[0].Scenarios) != 1 {
		t.Fatalf("expected one bed of one scenario, got %+v", tm)
	}
	b := tm.Beds[0]
	if b.Bed != "toy" || b.Raising != 3 || b.Scenarios[0].Raising != 3 || b.Scenarios[0].Status != "passed" ||
		!strings.HasSuffix(b.Scenarios[0].Where, "toy.feature:2") || len(b.Slowest) != 1 || b.Parallel != 1 {
		t.Errorf("expected the toy bed's 3 s of raising in its one scenario at toy.feature:2, got %+v", b)
	}
	if b.ClustersRaised != 1 || b.ClustersReset != 1 || b.Scenarios[0].Raised != 1 || !b.Scenarios[0].Reset {
		t.Errorf("expected one cluster raised and reset, by its one scenario, got %+v", b)
	}
	for _, want := range []string{"raising 3.0s (1 cluster raised)", "(1 cluster reset and handed on)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("expected the summary to say %q, got:\n%s", want, out.String())
		}
	}
	back, _, _, err := ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	if s := back.Beds[0].Scenarios[0]; s.Raised != 1 || !s.Reset || s.Raising != 3*time.Second {
		t.Errorf("expected the run's messages to keep the scenario's raise and reset, got raised %d, reset %v, raising %s", s.Raised, s.Reset, s.Raising)
	}
}

// TestAParallelRunReportsWhatASerialRunDoes: junit.xml and cucumber.json of a bed run four
// scenarios at once are those of a run one at a time, but for times.
func TestAParallelRunReportsWhatASerialRunDoes(t *testing.T) {
	// Times differ from run to run, serial or not: the reports' fields and
	// each step's duration as the steps' output renders it (short).
	times := regexp.MustCompile(`(time|timestamp)="[^"]*"|"duration": \d+|\((&lt;|<|\\u003c)?[0-9.]+m?s\)|\([0-9]+m[0-9]+s\)`)
	dir := features(t, map[string]string{"toy.feature": toy})
	reports := func(parallel int) map[string]string {
		report := t.TempDir()
		f := &fakeSteps{release: make(chan struct{})}
		defer close(f.release)
		_, err := Run(context.Background(), Options{Beds: []Bed{toyBed("toy", 1)}, FeaturesDir: dir, Parallel: parallel,
			ReportDir: report, Scenario: f.scenario})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, name := range []string{JUnitFile, CucumberFile} {
			b, err := os.ReadFile(filepath.Join(report, name))
			if err != nil {
				t.Fatal(err)
			}
			out[name] = times.ReplaceAllString(string(b), "")
		}
		return out
	}
	serial, parallel := reports(1), reports(4)
	for name, want := range serial {
		if parallel[name] != want {
			t.Errorf("%s of the parallel run differs from the serial run's:\n--- serial\n%s\n--- parallel\n%s", name, want, parallel[name])
		}
	}
}
