// Package specpage renders a run of the beds as one self-contained HTML page: the living
// specification a reviewer reads in a browser, organised by design 25's five steps (issue
// 23). Its CSS and JavaScript are in the page; it fetches nothing, and its Content-Security-
// Policy forbids it to. The page is built from a Run, which knows nothing of how the beds ran:
// package beds fills one from its Result.
package specpage

import "time"

// Run is what the page shows: a whole run of the beds.
type Run struct {
	// Title heads the page.
	Title   string
	Started time.Time
	Elapsed time.Duration
	// Status is the run's verdict: "passed", or why not ("failed", "not run" …).
	Status string
	Counts []Count
	// Statuses are those of every scenario on the page, the beds not in the run included:
	// what the page's status filter offers.
	Statuses []Count
	// Beds are every bed of the specification in step order, run or not.
	Beds []Bed
	// Tags tally the scenarios run by tag, the tags sorted.
	Tags []TagSummary
	// HistoryRuns is how many runs the trends span; 0 without a history.
	HistoryRuns int
}

// Point is a bed's or a scenario's verdict and time in one run of a trend; Height is its
// bar's, in pixels, by its time.
type Point struct {
	Status  string
	Seconds float64
	When    time.Time
	Height  int
}

// Count is how many scenarios had a status.
type Count struct {
	Status string
	N      int
}

// Bed is one step of design 25 §10 and what the run did of it.
type Bed struct {
	Step    int
	Name    string
	Summary string
	// Ran is false for a bed this run did not select or did not reach; Note says why.
	Ran  bool
	Note string
	// Status is the bed's verdict, as the run's.
	Status   string
	Counts   []Count
	Started  time.Time
	Elapsed  time.Duration
	Parallel int
	Features []Feature
	Matrix   *Matrix
	// Trend is the bed in the runs of the history, oldest first, this one last.
	Trend []Point
}

// Feature is a feature file of a bed with its prose and its scenarios.
type Feature struct {
	Name        string
	Description string
	// Path is the file as people name it ("features/4-living.feature").
	Path      string
	Scenarios []Scenario
}

// Scenario is one scenario (an outline's row) as it ran.
type Scenario struct {
	// ID is unique in the page: the anchor a link to the scenario names.
	ID          string
	Name        string
	Description string
	// Where is path:line; Href links the feature file at that line, relative to the page.
	Where   string
	Href    string
	Tags    []string
	Status  string
	Started time.Time
	Elapsed time.Duration
	Steps   []Step
	// Measurements are what its steps measured.
	Measurements []Measurement
	// Error is why it did not pass: the "expected X, got Y". ErrorShown is set when a
	// step shows it already, so the page does not say it twice.
	Error      string
	ErrorShown bool
	// Rerun runs it again alone.
	Rerun string
	// Evidence are the files the run kept of it (container logs), each shortened to its end.
	Evidence []File
	// Trend is the scenario in the runs of the history, oldest first, this one last.
	Trend []Point
}

// Step is one step as written and as it ran.
type Step struct {
	Keyword string
	Text    string
	// DocString and Table are the step's argument, if it has one.
	DocString string
	Table     [][]string
	Status    string
	Started   time.Time
	Elapsed   time.Duration
	Error     string
}

// Measurement is a value a step measured, as people read it.
type Measurement struct {
	Name  string
	Value string
}

// File is a piece of evidence; Truncated when only its end is shown.
type File struct {
	Name      string
	Text      string
	Truncated bool
}

// Matrix is a bed's table of implementations by capability.
type Matrix struct {
	Param string
	Tags  []string
	Rows  []MatrixRow
}

// MatrixRow is an implementation and its verdict per capability.
type MatrixRow struct {
	Value string
	Cells []MatrixCell
}

// MatrixCell is a verdict with the scenarios it tallies.
type MatrixCell struct {
	Verdict   string
	Passed    int
	Scenarios int
}

// TagSummary tallies the scenarios carrying a tag.
type TagSummary struct {
	Tag    string
	Total  int
	Counts []Count
}
