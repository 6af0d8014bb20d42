package beds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	messages "github.com/cucumber/messages/go/v34"
)

const specToy = `Feature: The toy's specification
  What the toy promises, in prose a reviewer reads.

  @floor
  Scenario: it passes
    A passing scenario's own prose.
    Given a mesh
    When the reload is measured
    Then all is well

  @bad
  Scenario: it fails
    Given a mesh
    And it keeps "server said <no>" as evidence
    Then it fails with "expected 3 streams, got 2"
    And all is well

  @bad @undefined
  Scenario: it is undefined
    Given a mesh
    Then nobody defined this step
`

// The page shows each bed's feature prose, every scenario with its description, tags,
// steps and their results, the measurements beside the scenario that took them, and a
// failed scenario's evidence inline; it names nothing outside itself.
func TestTheSpecPageShowsTheRunAsTheSpecification(t *testing.T) {
	report := t.TempDir()
	if _, _, err := run(t, map[string]string{"toy.feature": specToy}, Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(report, SpecPageFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"Step 1 · toy",
		"The toy&#39;s specification",
		"What the toy promises, in prose a reviewer reads.",
		"A passing scenario&#39;s own prose.",
		`data-tags="@floor"`,
		`<span class="kw">When</span>the reload is measured`,
		"<th>reload latency</th><td>812ms</td>",
		"expected 3 streams, got 2",
		"bedrun toy --run &#39;^it fails$&#39;",
		"server said &lt;no&gt;",
		`class="badge undefined">undefined`,
		"toy.feature#L12",
		"Content-Security-Policy",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("expected the page to contain %q", want)
		}
	}
	for _, never := range []string{"http://", "https://", "src=", "<link"} {
		if strings.Contains(page, never) {
			t.Errorf("the page names something outside itself: %q", never)
		}
	}
}

// The run's messages are Cucumber Messages a standard reader takes, and `bedrun report`
// renders from them the page the run wrote, byte for byte, raising nothing; a bed the run
// stopped before is on the page, its scenarios not run.
func TestTheReportIsRenderedAgainFromTheRunsMessages(t *testing.T) {
	report := t.TempDir()
	_, _, err := run(t, map[string]string{"toy.feature": specToy, "second.feature": "Feature: Second\n  Scenario: later\n    Given a mesh\n"},
		Options{Beds: []Bed{toyBed("toy", 1), toyBed("second", 2)}, ReportDir: report})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(report, SpecPageFile)
	written, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(page); err != nil {
		t.Fatal(err)
	}
	if err := RenderReport(report); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, again) {
		t.Fatalf("the page rendered again differs from the run's (%d bytes, then %d)", len(written), len(again))
	}
	for _, want := range []string{"Step 2 · second", `data-status="not-run"`, "later", "Not run: an earlier bed is not green: toy (step 1)"} {
		if !strings.Contains(string(again), want) {
			t.Errorf("expected the page to contain %q", want)
		}
	}

	f, err := os.Open(filepath.Join(report, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kinds := map[string]int{}
	failed := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e messages.Envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("a line that is no envelope: %v: %s", err, sc.Bytes())
		}
		var m map[string]json.RawMessage
		_ = json.Unmarshal(sc.Bytes(), &m)
		for k := range m {
			kinds[k]++
		}
		if e.TestStepFinished != nil && e.TestStepFinished.TestStepResult.Status == messages.TestStepResultStatus_FAILED {
			failed++
		}
	}
	want := map[string]int{"meta": 1, "source": 2, "gherkinDocument": 2, "pickle": 4, "testRunStarted": 1,
		"testCase": 4, "testCaseStarted": 3, "testCaseFinished": 3, "testRunFinished": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("messages: expected %d %s, got %d (%v)", n, k, kinds[k], kinds)
		}
	}
	if failed != 1 {
		t.Errorf("messages: expected one step FAILED, got %d", failed)
	}
}

// A history file gathers the runs; the page draws each bed's and scenario's trend from it;
// it keeps the newest HistoryKept runs, and a file that is not a history is refused, not
// overwritten.
func TestTheHistoryGivesEachScenarioItsTrend(t *testing.T) {
	history := filepath.Join(t.TempDir(), "ci", "history.json")
	var page string
	for range 2 {
		report := t.TempDir()
		if _, _, err := run(t, map[string]string{"toy.feature": specToy}, Options{Beds: []Bed{toyBed("toy", 1)}, ReportDir: report, History: history}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(report, SpecPageFile))
		if err != nil {
			t.Fatal(err)
		}
		page = string(b)
		if _, err := os.Stat(filepath.Join(report, HistoryFile)); err != nil {
			t.Fatalf("expected the history beside the page: %v", err)
		}
	}
	h, err := readHistory(history)
	if err != nil || len(h.Runs) != 2 || len(h.Runs[1].Scenarios) != 3 || h.Runs[1].Beds[0].Status != "failed" {
		t.Fatalf("expected two runs of three scenarios, the bed failed, got %+v, %v", h, err)
	}
	// The passing scenario's strip is the only one with passed points: the bed failed.
	if n := strings.Count(page, `<i class="passed"`); n != 2 {
		t.Errorf("expected the passing scenario's trend of two runs, found %d passed points", n)
	}
	if n := strings.Count(page, `<i class="failed"`); n != 2*3 {
		t.Errorf("expected the failing scenario's and the bed's (in the summary and its heading) trends of two runs, found %d failed points", n)
	}
	if !strings.Contains(page, "last 2 runs") {
		t.Errorf("expected the summary to span the last 2 runs")
	}

	for range HistoryKept {
		h.Runs = append(h.Runs, h.Runs[0])
	}
	if err := writeHistory(history, h); err != nil {
		t.Fatal(err)
	}
	if h, err = appendHistory(history, Result{}); err != nil || len(h.Runs) != HistoryKept {
		t.Fatalf("expected the newest %d runs kept, got %d, %v", HistoryKept, len(h.Runs), err)
	}

	if err := os.WriteFile(history, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := appendHistory(history, Result{}); err == nil || !strings.Contains(err.Error(), "not a history of the beds") {
		t.Fatalf("expected a file that is no history refused, got %v", err)
	}
	if b, _ := os.ReadFile(history); string(b) != "not json" {
		t.Fatal("a file that is no history was overwritten")
	}
}

// Every id in the messages is unique though the run parses bed by bed, and a scenario the
// selection left out is on the page once, not run.
func TestTheMessagesOfASelectionNameEachScenarioOnce(t *testing.T) {
	for _, o := range []Options{{Tags: "~@undefined"}, {Match: regexp.MustCompile(`^(it passes|it fails|later|last \(one\))$`)}} {
		t.Run(fmt.Sprintf("tags %q run %v", o.Tags, o.Match), func(t *testing.T) { selectionOnce(t, o) })
	}
}

func selectionOnce(t *testing.T, o Options) {
	report := t.TempDir()
	second := "Feature: Second\n  Scenario: later\n    Given a mesh\n  Scenario Outline: last\n    Given a mesh\n" +
		"    Examples:\n      | n |\n      | one |\n      | two |\n"
	o.Beds, o.ReportDir = []Bed{toyBed("toy", 1), toyBed("second", 2)}, report
	if _, _, err := run(t, map[string]string{"toy.feature": specToy, "second.feature": second}, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(report, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e messages.Envelope
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if p := e.Pickle; p != nil {
			if ids[p.Id] {
				t.Errorf("pickle id %s twice", p.Id)
			}
			ids[p.Id] = true
		}
	}
	if len(ids) != 6 {
		t.Errorf("expected the 6 scenarios as pickles, got %d", len(ids))
	}
	r, _, _, err := ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(report, SpecPageFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"it passes", "it is undefined", "later", "last (one)", "last (two)"} {
		if n := strings.Count(string(page), `<span class="name">`+name+`</span>`); n != 1 {
			t.Errorf("expected %q once on the page, found it %d times", name, n)
		}
	}
	if got := statuses(r); got["it is undefined"] != NotRun || got["it fails"] != Failed || got["later"] != NotRun {
		t.Errorf("read back: expected it fails failed, the rest not run, got %v", got)
	}
}

// Every status a step can have survives cucumber's messages, those cucumber has no word for
// (error, interrupted) by their exception.
func TestAStepsStatusSurvivesTheMessages(t *testing.T) {
	for s := NotRun; s <= Ambiguous; s++ {
		if got := stepStatusOf(stepResultOf(StepResult{Status: s})); got != s {
			t.Errorf("%s: read back as %s", s, got)
		}
	}
}
