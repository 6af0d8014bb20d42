package beds

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// claims is a feature of two implementations: full claims everything and fails one tools
// scenario; partial claims the floor alone. A scenario that is not an outline is in no row.
const claims = `Feature: Claims
  Scenario: a check of the registry
    Given a mesh

  @floor
  Scenario Outline: the floor
    Given a mesh
    Then all is well

    Examples:
      | implementation |
      | full           |
      | partial        |

  @tools
  Scenario Outline: a tool
    Given a mesh
    Then <outcome>

    Examples:
      | outcome                        | implementation |
      | all is well                    | full           |
      | it fails with "no responders"  | full           |
`

func matrixBed() Bed {
	b := toyBed("claims", 1)
	b.Matrix = &Matrix{Param: "implementation", Tags: []string{"@floor", "@tools", "@events"}, Unclaimed: "not claimed"}
	return b
}

// TestMatrixListsEachImplementationForWhatItPasses: the partial implementation passes what
// it claims and is "not claimed" for the rest, however the full one fares.
func TestMatrixListsEachImplementationForWhatItPasses(t *testing.T) {
	report := t.TempDir()
	res, out, err := run(t, map[string]string{"claims.feature": claims}, Options{Beds: []Bed{matrixBed()}, ReportDir: report})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  by implementation:",
		"    implementation   @floor       @tools        @events",
		"    full             passed 1/1   failed 1/2    not claimed",
		"    partial          passed 1/1   not claimed   not claimed",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("progress lacks the line %q", want)
		}
	}
	ms := res.Matrices()
	if len(ms) != 1 || len(ms[0].Rows) != 2 {
		t.Fatalf("expected one matrix of two rows, got %+v", ms)
	}
	tools := ms[0].Rows[0].Cells[1]
	if tools.Verdict != "failed" || tools.Scenarios != 2 || tools.Passed != 1 ||
		!reflect.DeepEqual(tools.NotPassed, []string{`a tool (it fails with "no responders", full): failed`}) {
		t.Errorf("full's tools cell: %+v", tools)
	}

	data, err := os.ReadFile(filepath.Join(report, MatrixFile))
	if err != nil {
		t.Fatal(err)
	}
	var written []MatrixResult
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(written, ms) {
		t.Errorf("%s differs from the run's matrix:\n%s", MatrixFile, data)
	}
}

// TestMatrixCellNotRunIsIncomplete: fail-fast leaves scenarios not run; their cell is not
// called failed.
func TestMatrixCellNotRunIsIncomplete(t *testing.T) {
	m := Matrix{Param: "implementation", Tags: []string{"@floor"}, Unclaimed: "not claimed"}
	sc := func(status Status) *ScenarioResult {
		return &ScenarioResult{Scenario: Scenario{Name: "s", Example: []string{"x"}, ExampleHeader: []string{"implementation"}, Tags: []string{"@floor"}}, Status: status}
	}
	got := m.tally(BedResult{Bed: Bed{Name: "b"}, Scenarios: []*ScenarioResult{sc(Passed), sc(NotRun)}})
	if c := got.Rows[0].Cells[0]; c.Verdict != "incomplete" || c.Passed != 1 || c.Scenarios != 2 {
		t.Fatalf("a cell with one passed and one not run: %+v", c)
	}
	// An interrupted scenario says nothing of the implementation: incomplete, named.
	got = m.tally(BedResult{Bed: Bed{Name: "b"}, Scenarios: []*ScenarioResult{sc(Passed), sc(Interrupted)}})
	if c := got.Rows[0].Cells[0]; c.Verdict != "incomplete" || c.Passed != 1 ||
		!reflect.DeepEqual(c.NotPassed, []string{"s (x): interrupted"}) {
		t.Fatalf("a cell with one passed and one interrupted: %+v", c)
	}
	got = m.tally(BedResult{Bed: Bed{Name: "b"}, Scenarios: []*ScenarioResult{sc(Failed), sc(Interrupted)}})
	if c := got.Rows[0].Cells[0]; c.Verdict != "failed" {
		t.Fatalf("a cell with one failed and one interrupted: %+v", c)
	}
}

func TestMatrixIsChecked(t *testing.T) {
	b := matrixBed()
	b.Matrix = &Matrix{Tags: []string{"floor"}}
	err := b.check(nil)
	for _, want := range []string{"no param", `tag "floor"`, "no word for a cell without scenarios"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("expected the check to say %q, got %v", want, err)
		}
	}
}

func TestMatrixOfARunWithoutOutlinesSaysSo(t *testing.T) {
	_, out, err := run(t, map[string]string{"claims.feature": claims}, Options{Beds: []Bed{matrixBed()}, Match: regexp.MustCompile("registry")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  by implementation: no scenario of this run names one\n") {
		t.Errorf("expected the summary to say no scenario names an implementation")
	}
}

// TestMatrixOfASelectionSaysWhatItLeftOut: a run narrowed to full's floor row says "not
// selected" where the bed has a scenario the selection left out (full's tools), and still
// "not claimed" where it has none (full's events).
func TestMatrixOfASelectionSaysWhatItLeftOut(t *testing.T) {
	res, out, err := run(t, map[string]string{"claims.feature": claims},
		Options{Beds: []Bed{matrixBed()}, Match: regexp.MustCompile(`the floor \(full\)`)})
	if err != nil {
		t.Fatal(err)
	}
	want := "    full             passed 1/1   not selected   not claimed"
	if !strings.Contains(out, want+"\n") {
		t.Errorf("progress lacks the line %q:\n%s", want, out)
	}
	ms := res.Matrices()
	if len(ms) != 1 || len(ms[0].Rows) != 1 {
		t.Fatalf("expected one matrix of one row, got %+v", ms)
	}
	if got := ms[0].Rows[0].Cells[1].Verdict; got != NotSelected {
		t.Errorf("full's tools cell: expected %q, got %q", NotSelected, got)
	}
}
