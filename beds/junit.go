package beds

import (
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The runner writes junit.xml itself, from what its hooks saw, rather than with godog's junit
// formatter: in godog v0.16 that formatter counts an ambiguous scenario as neither a failure
// nor an error, never counts skipped ones, has nowhere for measurements, and writes one file
// per suite while a run here is several beds.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Timestamp  string           `xml:"timestamp,attr,omitempty"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
	SystemErr  string           `xml:"system-err,omitempty"`
}

// junitProperties is a pointer in its parents so that none gives no element at all.
type junitProperties struct {
	List []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name       string           `xml:"name,attr"`
	Classname  string           `xml:"classname,attr"`
	File       string           `xml:"file,attr,omitempty"`
	Line       int              `xml:"line,attr,omitempty"`
	Time       string           `xml:"time,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Failure    *junitProblem    `xml:"failure,omitempty"`
	Error      *junitProblem    `xml:"error,omitempty"`
	Skipped    *junitProblem    `xml:"skipped,omitempty"`
	SystemOut  string           `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// buildJUnit is a testsuite per bed and a testcase per scenario; a scenario's steps with
// their timings are its system-out, its measurements its properties.
func buildJUnit(r Result, featuresDir string) junitSuites {
	out := junitSuites{Name: "bedrun", Time: seconds(r.Elapsed)}
	for _, b := range r.Beds {
		s := junitSuite{
			Name: b.Bed.Name,
			Time: seconds(b.Elapsed),
			Properties: &junitProperties{[]junitProperty{
				{"step", strconv.Itoa(b.Bed.Step)},
				{"owner", b.Bed.Owner},
				{"timeout", b.Bed.Timeout.String()},
			}},
		}
		if !b.Started.IsZero() {
			s.Timestamp = b.Started.UTC().Format(time.RFC3339)
		}
		if b.Err != nil {
			s.SystemErr = b.Err.Error()
		}
		for _, sc := range b.Scenarios {
			c := junitCase{
				Name:      sc.Title(),
				Classname: b.Bed.Name + "." + strings.TrimSuffix(sc.Feature, ".feature"),
				File:      displayPath(featuresDir, sc.Feature),
				Line:      sc.Line,
				Time:      seconds(sc.Elapsed),
				SystemOut: stepLog(sc),
			}
			if len(sc.Measurements) > 0 {
				c.Properties = &junitProperties{}
				for _, m := range sc.Measurements {
					c.Properties.List = append(c.Properties.List, junitProperty{m.Name, precise(m.Value)})
				}
			}
			msg := ""
			if sc.Err != nil {
				msg = sc.Err.Error()
			}
			problem := &junitProblem{Message: firstLine(msg), Type: sc.Status.String(), Text: msg}
			switch sc.Status {
			case Failed:
				c.Failure = problem
				s.Failures++
			case Errored, Undefined, Pending, Ambiguous:
				c.Error = problem
				s.Errors++
			case Skipped, NotRun:
				c.Skipped = problem
				s.Skipped++
			case Interrupted:
				// Neither a failure nor an error of the product: the run was stopped.
				problem.Message = "interrupted: " + problem.Message
				c.Skipped = problem
				s.Skipped++
			}
			s.Tests++
			s.Cases = append(s.Cases, c)
		}
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
		out.Suites = append(out.Suites, s)
	}
	return out
}

// stepLog is a scenario's steps as the progress printed them, without colour.
func stepLog(sc *ScenarioResult) string {
	var b strings.Builder
	p := printer{out: &b}
	for _, st := range sc.Steps {
		p.step(st)
	}
	for _, m := range sc.Measurements {
		p.measured(m)
	}
	return b.String()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func writeJUnit(path string, r Result, featuresDir string) error {
	b, err := xml.MarshalIndent(buildJUnit(r, featuresDir), "", "  ")
	if err != nil {
		return fmt.Errorf("encode junit: %w", err)
	}
	return writeFile(path, append([]byte(xml.Header), append(b, '\n')...))
}

// writeFile writes a report whole or not at all, so a reader never sees half of one.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
