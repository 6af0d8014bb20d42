package beds

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Matrix asks a bed's summary for a table: its scenarios tallied by the value of one
// example column (the rows) and by tags (the columns). The conformance bed's rows are
// implementations and its columns capabilities, so an implementation that claims less is
// listed for what it passes and "not claimed" for the rest, rather than failing as a whole.
type Matrix struct {
	// Param is the examples column whose values are the rows ("implementation").
	Param string
	// Tags are the columns, in order ("@connection", "@events").
	Tags []string
	// Unclaimed is what a cell with no scenario says ("not claimed").
	Unclaimed string
}

func (m Matrix) check() []string {
	var bad []string
	if m.Param == "" {
		bad = append(bad, "matrix: no param")
	}
	if len(m.Tags) == 0 {
		bad = append(bad, "matrix: no tags")
	}
	for _, t := range m.Tags {
		if !strings.HasPrefix(t, "@") || strings.ContainsAny(t, " \t") {
			bad = append(bad, fmt.Sprintf("matrix: tag %q: must be one word starting with @", t))
		}
	}
	if m.Unclaimed == "" {
		bad = append(bad, "matrix: no word for a cell without scenarios")
	}
	return bad
}

// MatrixResult is a bed's matrix as it ran.
type MatrixResult struct {
	Bed   string      `json:"bed"`
	Param string      `json:"param"`
	Tags  []string    `json:"tags"`
	Rows  []MatrixRow `json:"rows"`
}

// MatrixRow is one value of the param ("go") and a cell per tag.
type MatrixRow struct {
	Value string       `json:"value"`
	Cells []MatrixCell `json:"cells"`
}

// MatrixCell tallies the scenarios of one row that carry one tag.
type MatrixCell struct {
	Tag string `json:"tag"`
	// Verdict is "passed" when every scenario passed, "failed" when any failed (or errored,
	// or had a step undefined, pending or ambiguous), "incomplete" when the rest were not
	// run, skipped or interrupted — an interrupted scenario says nothing of the
	// implementation, so its cell is not called failed, and NotPassed names it — or the
	// matrix's Unclaimed word when the row has no scenario with the tag, or NotSelected when
	// it has one the run's selection left out.
	Verdict   string   `json:"verdict"`
	Scenarios int      `json:"scenarios"`
	Passed    int      `json:"passed"`
	NotPassed []string `json:"not_passed,omitempty"` // titles, with their status
}

// tally builds the matrix of a bed's results; rows are sorted by value. A scenario without
// the param (not an outline, or another column) is in no row.
func (m Matrix) tally(r BedResult) MatrixResult {
	out := MatrixResult{Bed: r.Bed.Name, Param: m.Param, Tags: slices.Clone(m.Tags)}
	var values []string
	for _, s := range r.Scenarios {
		if v, ok := s.Param(m.Param); ok && !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	for _, v := range values {
		row := MatrixRow{Value: v}
		for _, tag := range m.Tags {
			c := MatrixCell{Tag: tag}
			failed := false
			for _, s := range r.Scenarios {
				if got, ok := s.Param(m.Param); !ok || got != v || !s.HasTag(tag) {
					continue
				}
				c.Scenarios++
				switch s.Status {
				case Passed:
					c.Passed++
				case NotRun, Skipped, Interrupted:
					c.NotPassed = append(c.NotPassed, fmt.Sprintf("%s: %s", s.Title(), s.Status))
				default:
					failed = true
					c.NotPassed = append(c.NotPassed, fmt.Sprintf("%s: %s", s.Title(), s.Status))
				}
			}
			c.Verdict = m.verdict(c, failed)
			if c.Scenarios == 0 && slices.ContainsFunc(r.unselected, func(s Scenario) bool {
				got, ok := s.Param(m.Param)
				return ok && got == v && s.HasTag(tag)
			}) {
				// The bed has it; this run's selection (--tags, --run) left it out.
				c.Verdict = NotSelected
			}
			row.Cells = append(row.Cells, c)
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// Verdicts of a cell besides Passed and Failed.
const incomplete = "incomplete"

// NotSelected is the verdict of a cell whose scenarios the bed has but the run's selection
// (its tags or --run) left out: not the matrix's Unclaimed word, which says there is none.
const NotSelected = "not selected"

func (m Matrix) verdict(c MatrixCell, failed bool) string {
	switch {
	case c.Scenarios == 0:
		return m.Unclaimed
	case failed:
		return Failed.String()
	case c.Passed < c.Scenarios:
		return incomplete
	}
	return Passed.String()
}

// lines is the matrix as a table for the progress output.
func (mr MatrixResult) lines() []string {
	header := append([]string{mr.Param}, mr.Tags...)
	table := [][]string{header}
	for _, row := range mr.Rows {
		line := []string{row.Value}
		for _, c := range row.Cells {
			cell := c.Verdict
			if c.Scenarios > 0 {
				cell = fmt.Sprintf("%s %d/%d", c.Verdict, c.Passed, c.Scenarios)
			}
			line = append(line, cell)
		}
		table = append(table, line)
	}
	widths := make([]int, len(header))
	for _, line := range table {
		for i, cell := range line {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var out []string
	for _, line := range table {
		var b strings.Builder
		for i, cell := range line {
			if i > 0 {
				b.WriteString("   ")
			}
			fmt.Fprintf(&b, "%-*s", widths[i], cell)
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// Matrices are the matrices of the beds of the run that ask for one.
func (r Result) Matrices() []MatrixResult {
	out := []MatrixResult{}
	for _, b := range r.Beds {
		if b.Bed.Matrix != nil {
			out = append(out, b.Bed.Matrix.tally(b))
		}
	}
	return out
}

func encodeMatrices(r Result) ([]byte, error) {
	b, err := json.MarshalIndent(r.Matrices(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode matrices: %w", err)
	}
	return append(b, '\n'), nil
}
