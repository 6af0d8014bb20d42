package beds

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// Report files, in Options.ReportDir.
const (
	// JUnitFile holds every bed of the run: a testsuite per bed, a testcase per scenario.
	JUnitFile = "junit.xml"
	// CucumberFile holds every feature of the run in cucumber's JSON format.
	CucumberFile = "cucumber.json"
	// MeasurementsFile lists what the steps measured (Measure).
	MeasurementsFile = "measurements.json"
	// MatrixFile holds the matrix (Bed.Matrix) of every bed of the run that has one.
	MatrixFile = "matrix.json"
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
func writeReports(dir string, r Result, featuresDir string) error {
	var errs []error
	if err := writeJUnit(filepath.Join(dir, JUnitFile), r, featuresDir); err != nil {
		errs = append(errs, err)
	}
	if err := writeCucumber(filepath.Join(dir, CucumberFile), r, featuresDir); err != nil {
		errs = append(errs, err)
	}
	ms := r.Measurements()
	if ms == nil {
		ms = []Measurement{}
	}
	if b, err := json.MarshalIndent(ms, "", "  "); err != nil {
		errs = append(errs, fmt.Errorf("encode measurements: %w", err))
	} else if err := writeFile(filepath.Join(dir, MeasurementsFile), append(b, '\n')); err != nil {
		errs = append(errs, err)
	}
	if b, err := encodeMatrices(r); err != nil {
		errs = append(errs, err)
	} else if err := writeFile(filepath.Join(dir, MatrixFile), b); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
