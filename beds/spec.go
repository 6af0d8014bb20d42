package beds

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/beds/specpage"
)

// evidenceTail bounds each piece of evidence the page shows: its end, where a container's
// log says what it did last.
const evidenceTail = 64 << 10

// RenderReport renders a report directory's page (SpecPageFile) from the run its messages
// hold (MessagesFile), raising nothing: what a run with a report does last, and what
// `bedrun report DIR` does again.
func RenderReport(dir string) error {
	r, featuresDir, featuresAbs, err := ReadReport(dir)
	if err != nil {
		return err
	}
	page := specRun(r, featuresDir, featuresAbs, dir)
	if h, err := readHistory(filepath.Join(dir, HistoryFile)); err != nil {
		return err
	} else if len(h.Runs) > 0 {
		withTrends(&page, h)
	}
	var buf bytes.Buffer
	if err := specpage.Render(&buf, page); err != nil {
		return fmt.Errorf("render %s: %w", SpecPageFile, err)
	}
	return writeFile(filepath.Join(dir, SpecPageFile), buf.Bytes())
}

// specRun is what the page shows of r; featuresDir is the features directory as the run
// named it, featuresAbs the same absolute, which the page links relative to reportDir.
func specRun(r Result, featuresDir, featuresAbs, reportDir string) specpage.Run {
	run := specpage.Run{Title: "The mesh's beds: the living specification", Started: r.Started, Elapsed: r.Elapsed,
		Status: runStatus(r), Counts: specCounts(r.Counts())}
	tags, all := map[string]Counts{}, Counts{}
	for _, pb := range pageBeds(r, featuresAbs) {
		bed, br := pb.bed, pb.result
		sb := specpage.Bed{Step: bed.Step, Name: bed.Name, Summary: bed.Summary, Ran: br != nil}
		var scenarios []*ScenarioResult
		if br != nil {
			sb.Status, sb.Counts, sb.Started, sb.Elapsed, sb.Parallel = bedStatus(*br), specCounts(br.Counts()), br.Started, br.Elapsed, br.Parallel
			scenarios = slices.Clone(br.Scenarios)
			for _, s := range br.unselected {
				scenarios = append(scenarios, &ScenarioResult{Scenario: s, Bed: bed.Name, Status: NotRun, Err: errNotSelected})
			}
			if m := bed.Matrix; m != nil {
				sb.Matrix = specMatrix(m.tally(*br))
			}
			if br.Err != nil {
				sb.Note = br.Err.Error()
			} else if c := br.Counts(); c[NotRun] == c.Total() && c.Total() > 0 && br.Scenarios[0].Err != nil {
				sb.Note = "Not run: " + br.Scenarios[0].Err.Error()
			}
		} else {
			sb.Status, sb.Note = NotRun.String(), "Not in this run."
			if pb.note != "" {
				sb.Note += " " + pb.note
			}
			for _, s := range pb.scenarios {
				scenarios = append(scenarios, &ScenarioResult{Scenario: s, Bed: bed.Name, Status: NotRun, Err: errNotSelected})
			}
		}
		sb.Features = specFeatures(bed, scenarios, featuresDir, featuresAbs, reportDir)
		for _, s := range scenarios {
			all[s.Status]++
			if s.Err == errNotSelected {
				continue
			}
			for _, t := range s.Tags {
				if tags[t] == nil {
					tags[t] = Counts{}
				}
				tags[t][s.Status]++
			}
		}
		run.Beds = append(run.Beds, sb)
	}
	run.Statuses = specCounts(all)
	names := make([]string, 0, len(tags))
	for t := range tags {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		run.Tags = append(run.Tags, specpage.TagSummary{Tag: t, Total: tags[t].Total(), Counts: specCounts(tags[t])})
	}
	return run
}

// specBeds are the beds the page shows: every registered bed, in step order, when the run's
// beds are registered ones (bedrun's), else the run's own.
func specBeds(r Result) []Bed {
	all := All()
	var own []Bed
	registered := true
	for _, b := range r.Beds {
		own = append(own, b.Bed)
		registered = registered && slices.ContainsFunc(all, func(a Bed) bool { return a.Name == b.Bed.Name })
	}
	if registered {
		return all
	}
	return own
}

// errNotSelected is the Err of a scenario the run's selection left out.
var errNotSelected = fmt.Errorf("not selected in this run")

// specFeatures groups a bed's scenarios by feature file, in the bed's order, each in file
// order.
func specFeatures(bed Bed, scenarios []*ScenarioResult, featuresDir, featuresAbs, reportDir string) []specpage.Feature {
	var out []specpage.Feature
	for _, path := range bed.Features {
		f := specpage.Feature{Path: displayPath(featuresDir, path)}
		var in []*ScenarioResult
		for _, s := range scenarios {
			if s.Feature == path {
				in = append(in, s)
			}
		}
		slices.SortStableFunc(in, func(a, b *ScenarioResult) int { return a.Line - b.Line })
		for _, s := range in {
			if s.src != nil && s.src.feature != nil && f.Name == "" {
				f.Name, f.Description = s.src.feature.Name, strings.TrimSpace(dedent(s.src.feature.Description))
			}
			f.Scenarios = append(f.Scenarios, specScenario(bed, s, featuresDir, featuresAbs, reportDir))
		}
		if f.Name == "" {
			f.Name = path
		}
		out = append(out, f)
	}
	return out
}

func specScenario(bed Bed, s *ScenarioResult, featuresDir, featuresAbs, reportDir string) specpage.Scenario {
	where := displayPath(featuresDir, s.Where())
	out := specpage.Scenario{ID: specpage.ScenarioID(bed.Name, s.Where()), Name: s.Title(), Where: where,
		Href: featureHref(reportDir, featuresAbs, s.Feature, s.Line), Tags: s.Tags, Status: s.Status.String(),
		Started: s.Started, Elapsed: s.Elapsed}
	if s.src != nil {
		out.Description = strings.TrimSpace(dedent(s.src.description))
	}
	for i, text := range s.Scenario.Steps {
		st := specpage.Step{Text: text, Status: NotRun.String()}
		if s.src != nil && i < len(s.src.steps) {
			src := s.src.steps[i]
			st.Keyword, st.Text = strings.TrimSpace(src.keyword), src.text
			if a := src.arg; a != nil {
				if a.DocString != nil {
					st.DocString = a.DocString.Content
				}
				if a.DataTable != nil {
					for _, row := range a.DataTable.Rows {
						var cells []string
						for _, c := range row.Cells {
							cells = append(cells, c.Value)
						}
						st.Table = append(st.Table, cells)
					}
				}
			}
		}
		if i < len(s.Steps) {
			r := s.Steps[i]
			st.Status, st.Started, st.Elapsed = r.Status.String(), r.Started, r.Elapsed
			if r.Err != nil {
				st.Error = r.Err.Error()
			}
		}
		out.Steps = append(out.Steps, st)
	}
	for _, m := range s.Measurements {
		out.Measurements = append(out.Measurements, specpage.Measurement{Name: m.Name, Value: precise(m.Value)})
	}
	if s.Status != Passed && s.Status != NotRun && s.Err != nil {
		out.Error = s.Err.Error()
		for _, st := range out.Steps {
			if st.Error == out.Error {
				out.ErrorShown = true // beside its step already
			}
		}
		out.Rerun = fmt.Sprintf("bedrun %s --run '%s'", bed.Name, strings.ReplaceAll("^"+regexp.QuoteMeta(s.Title())+"$", "'", `'\''`))
		out.Evidence = evidence(reportDir, bed.Name, s.Scenario)
	}
	return out
}

// evidence reads the files kept of a scenario (evidenceFiles), each shortened to its end.
func evidence(reportDir, bed string, s Scenario) []specpage.File {
	var out []specpage.File
	for _, rel := range evidenceFiles(reportDir, bed, s) {
		b, err := os.ReadFile(filepath.Join(reportDir, filepath.FromSlash(rel)))
		if err != nil {
			continue
		}
		f := specpage.File{Name: rel}
		if len(b) > evidenceTail {
			b, f.Truncated = b[len(b)-evidenceTail:], true
		}
		f.Text = strings.ToValidUTF8(string(b), "\uFFFD")
		out = append(out, f)
	}
	return out
}

// featureHref links a feature file at a line, relative to the report directory.
func featureHref(reportDir, featuresDir, feature string, line int) string {
	target := filepath.Join(featuresDir, feature)
	if absDir, err := filepath.Abs(reportDir); err == nil {
		if absTarget, err := filepath.Abs(target); err == nil {
			if rel, err := filepath.Rel(absDir, absTarget); err == nil {
				target = rel
			}
		}
	}
	return fmt.Sprintf("%s#L%d", filepath.ToSlash(target), line)
}

// dedent removes the indentation Gherkin descriptions carry on every line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

func specMatrix(m MatrixResult) *specpage.Matrix {
	out := &specpage.Matrix{Param: m.Param, Tags: m.Tags}
	for _, r := range m.Rows {
		row := specpage.MatrixRow{Value: r.Value}
		for _, c := range r.Cells {
			row.Cells = append(row.Cells, specpage.MatrixCell{Verdict: c.Verdict, Passed: c.Passed, Scenarios: c.Scenarios})
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// specCounts lists c's statuses from best to worst, leaving out those with none.
func specCounts(c Counts) []specpage.Count {
	var out []specpage.Count
	for s := NotRun; s <= Ambiguous; s++ {
		if c[s] > 0 {
			out = append(out, specpage.Count{Status: s.String(), N: c[s]})
		}
	}
	slices.SortStableFunc(out, func(a, b specpage.Count) int { return statusRank(a.Status) - statusRank(b.Status) })
	return out
}

// statusRank puts passed first and not run last.
func statusRank(s string) int {
	if s == Passed.String() {
		return 0
	}
	if s == NotRun.String() {
		return 2
	}
	return 1
}

// bedStatus is a bed's verdict: passed, or its worst scenario's status.
func bedStatus(b BedResult) string {
	if b.OK() {
		return Passed.String()
	}
	return worst(b.Counts()).String()
}

func runStatus(r Result) string {
	if r.OK() {
		return Passed.String()
	}
	return worst(r.Counts()).String()
}

// verdictOrder ranks the statuses for a verdict, first the one that names it: a product
// that did not do what was asserted over a bed that could not check it, over a
// specification not yet written, over a run cut short.
var verdictOrder = []Status{Failed, Errored, Ambiguous, Undefined, Pending, Interrupted, Skipped, NotRun}

// worst is the status that names a verdict over c: passed only when everything counted passed.
func worst(c Counts) Status {
	for _, s := range verdictOrder {
		if c[s] > 0 {
			return s
		}
	}
	if c[Passed] > 0 {
		return Passed
	}
	return NotRun
}

// withTrends puts the history's trend beside each bed and scenario of page.
func withTrends(page *specpage.Run, h History) {
	page.HistoryRuns = len(h.Runs)
	for i := range page.Beds {
		b := &page.Beds[i]
		b.Trend = trendOf(h.trend(b.Name, ""))
		for j := range b.Features {
			for k := range b.Features[j].Scenarios {
				s := &b.Features[j].Scenarios[k]
				s.Trend = trendOf(h.trend(b.Name, s.Name))
			}
		}
	}
}

// trendOf is a trend for the page, each point's height scaled to the longest run in it.
func trendOf(entries []HistoryEntry, when []time.Time) []specpage.Point {
	longest := 0.0
	for _, e := range entries {
		longest = max(longest, e.Seconds)
	}
	var out []specpage.Point
	for i, e := range entries {
		p := specpage.Point{Status: e.Status, Seconds: e.Seconds, When: when[i], Height: trendLow}
		if longest > 0 {
			p.Height = trendLow + int(float64(trendHigh-trendLow)*e.Seconds/longest)
		}
		out = append(out, p)
	}
	return out
}

// A trend's points are trendLow to trendHigh pixels high, by their time.
const (
	trendLow  = 4
	trendHigh = 18
)
