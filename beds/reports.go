package beds

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Report files, in Options.ReportDir.
const (
	// JUnitFile holds every bed of the run: a testsuite per bed, a testcase per scenario.
	JUnitFile = "junit.xml"
	// CucumberFile holds every feature of the run in cucumber's JSON format.
	CucumberFile = "cucumber.json"
	// MeasurementsFile holds where each bed's time went (Timings) and what the steps
	// measured (Measure).
	MeasurementsFile = "measurements.json"
	// MatrixFile holds the matrix (Bed.Matrix) of every bed of the run that has one.
	MatrixFile = "matrix.json"
	// SpecPageFile is the run as the living specification: one self-contained HTML page
	// for people, organised by design 25's five steps (package specpage).
	SpecPageFile = "index.html"
	// MessagesFile holds the run as Cucumber Messages (NDJSON), the page's source.
	MessagesFile = "messages.ndjson"
)

// MarshalJSON spells the value both for people ("865ms", three significant digits) and for
// tools (seconds, exact).
func (m Measurement) MarshalJSON() ([]byte, error) {
	type plain Measurement
	return json.Marshal(struct {
		plain
		Value   string  `json:"value"`
		Seconds float64 `json:"seconds"`
	}{plain(m), precise(m.Value), m.Value.Seconds()})
}

// writeReports writes the run's reports into dir; it writes all it can and reports every
// file it could not.
func writeReports(dir string, r Result, featuresDir string, history *History) error {
	var errs []error
	if history != nil {
		if err := writeHistory(filepath.Join(dir, HistoryFile), *history); err != nil {
			errs = append(errs, err)
		}
	}
	if err := writeJUnit(filepath.Join(dir, JUnitFile), r, featuresDir); err != nil {
		errs = append(errs, err)
	}
	if err := writeCucumber(filepath.Join(dir, CucumberFile), r, featuresDir); err != nil {
		errs = append(errs, err)
	}
	if b, err := json.MarshalIndent(timingsOf(r, featuresDir), "", "  "); err != nil {
		errs = append(errs, fmt.Errorf("encode measurements: %w", err))
	} else if err := writeFile(filepath.Join(dir, MeasurementsFile), append(b, '\n')); err != nil {
		errs = append(errs, err)
	}
	if err := writeMessages(filepath.Join(dir, MessagesFile), r, featuresDir); err != nil {
		errs = append(errs, err)
	} else if err := RenderReport(dir); err != nil {
		// The page is rendered from the messages, as `bedrun report` renders it again.
		errs = append(errs, err)
	}
	if b, err := encodeMatrices(r); err != nil {
		errs = append(errs, err)
	} else if err := writeFile(filepath.Join(dir, MatrixFile), b); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Timings is measurements.json: per bed, where its time went and each scenario's; and every
// measurement the steps took, in the order taken. Seconds are exact; "at once" is the
// scenarios' time over the bed's wall time.
type Timings struct {
	Beds         []BedTiming   `json:"beds"`
	Measurements []Measurement `json:"measurements"`
}

// BedTiming is a bed's Time in seconds, with its scenarios'.
type BedTiming struct {
	Bed      string `json:"bed"`
	Step     int    `json:"step"`
	Parallel int    `json:"parallel"`
	// Seconds is the bed's wall time; ScenarioSeconds its scenarios' summed, split into
	// setup, raising, steps (other than raising) and teardown.
	Seconds         float64 `json:"seconds"`
	ScenarioSeconds float64 `json:"scenario_seconds"`
	Setup           float64 `json:"setup_seconds"`
	Raising         float64 `json:"raising_seconds"`
	Steps           float64 `json:"steps_seconds"`
	Teardown        float64 `json:"teardown_seconds"`
	// ClustersRaised is how many clusters its scenarios raised; ClustersReset how many times
	// a scenario reset its cluster and handed it on instead of tearing it down.
	ClustersRaised int `json:"clusters_raised"`
	ClustersReset  int `json:"clusters_reset"`
	// Slowest are the places of the five slowest scenarios, slowest first.
	Slowest   []string         `json:"slowest"`
	Scenarios []ScenarioTiming `json:"scenarios"`
}

// ScenarioTiming is a scenario's time, by phase.
type ScenarioTiming struct {
	Scenario string    `json:"scenario"`
	Where    string    `json:"where"`
	Status   string    `json:"status"`
	Started  time.Time `json:"started,omitzero"`
	Seconds  float64   `json:"seconds"`
	Setup    float64   `json:"setup_seconds"`
	Raising  float64   `json:"raising_seconds"`
	Teardown float64   `json:"teardown_seconds"`
	Raised   int       `json:"clusters_raised,omitempty"`
	Reset    bool      `json:"cluster_reset,omitempty"`
}

func timingsOf(r Result, featuresDir string) Timings {
	out := Timings{Beds: []BedTiming{}, Measurements: r.Measurements()}
	if out.Measurements == nil {
		out.Measurements = []Measurement{}
	}
	for _, b := range r.Beds {
		t := b.Time()
		bt := BedTiming{Bed: b.Bed.Name, Step: b.Bed.Step, Parallel: max(1, b.Parallel),
			Seconds: t.Wall.Seconds(), ScenarioSeconds: t.Scenarios.Seconds(), Setup: t.Setup.Seconds(),
			Raising: t.Raising.Seconds(), Steps: t.Steps.Seconds(), Teardown: t.Teardown.Seconds(),
			ClustersRaised: t.Raised, ClustersReset: t.Reset,
			Slowest: []string{}, Scenarios: []ScenarioTiming{}}
		for _, s := range b.Slowest(5) {
			bt.Slowest = append(bt.Slowest, displayPath(featuresDir, s.Where()))
		}
		for _, s := range b.Scenarios {
			bt.Scenarios = append(bt.Scenarios, ScenarioTiming{Scenario: s.Title(), Where: displayPath(featuresDir, s.Where()),
				Status: s.Status.String(), Started: s.Started, Seconds: s.Elapsed.Seconds(), Setup: s.Setup.Seconds(),
				Raising: s.Raising.Seconds(), Teardown: s.Teardown.Seconds(), Raised: s.Raised, Reset: s.Reset})
		}
		out.Beds = append(out.Beds, bt)
	}
	return out
}

// ReadTimings reads the Timings a run wrote into its report directory.
func ReadTimings(dir string) (Timings, error) {
	var t Timings
	b, err := os.ReadFile(filepath.Join(dir, MeasurementsFile))
	if err != nil {
		return t, fmt.Errorf("read the last run's times: %w", err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("read the last run's times: %s is not a report of this bedrun (%w)", filepath.Join(dir, MeasurementsFile), err)
	}
	return t, nil
}
