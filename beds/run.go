package beds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
)

// Options says which beds to run and how.
type Options struct {
	// Beds are run in this order (Lookup returns them in step order).
	Beds []Bed
	// FeaturesDir holds the feature files the beds name; default "features".
	FeaturesDir string
	// Tags is a godog tag expression selecting scenarios ("@reload && ~@slow"); "" runs all.
	Tags string
	// Match, when set, runs only the scenarios whose title (name, and an outline's example
	// values) it matches, like go test -run; an outline's rows are selected one by one.
	Match *regexp.Regexp
	// Parallel is how many scenarios of a bed run at once; 0 or 1 runs them one at a time.
	// Beds still run one after the other. Run in parallel, a scenario's progress is one line
	// at its start and one at its end, its steps shown under the end when it did not pass;
	// the reports are as a serial run's, in the features' order. The scenarios must keep
	// their state to themselves (Scenario is called once per scenario) and lease, not share,
	// what they raise.
	Parallel int
	// FailFast stops at the first scenario that does not pass; later scenarios and beds are
	// reported as not run.
	FailFast bool
	// ReportDir, when set, receives junit.xml, cucumber.json, measurements.json and
	// matrix.json, and a directory per bed for the steps' artifacts (ArtifactDir) and a hung
	// bed's goroutines.
	ReportDir string
	// History, when set, is a file each run appends its verdicts and times to (History),
	// keeping the newest HistoryKept runs; the page (SpecPageFile) draws each bed's and
	// scenario's trend from it.
	History string
	// Out receives the live progress; default io.Discard. Make it a Console to share it
	// with the steps.
	Out io.Writer
	// Color paints the progress and redraws a running step's line: for a terminal. A
	// Console's own setting wins.
	Color bool
	// Suite binds suite hooks (BeforeSuite, AfterSuite, suite-wide scenario hooks). It is
	// called once per bed, as godog initialises each bed's suite.
	Suite func(*godog.TestSuiteContext)
	// Scenario binds the step definitions and scenario hooks, once per scenario. Its After
	// hooks run even when the bed's context has ended (timeout, interrupt): they should tear
	// down under context.WithoutCancel with their own deadline.
	Scenario func(*godog.ScenarioContext)
	// Infrastructure are sentinels besides ErrInfrastructure that mark a failure of the
	// machinery rather than of the product (e.g. harness.ErrInfrastructure): a scenario
	// failing with one is reported as an error, not a failure.
	Infrastructure []error
	// Heartbeat is how often a step still running is reported as such; default 30s.
	Heartbeat time.Duration
	// Grace is how long a bed whose context has ended may take to notice before Run declares
	// it hung, dumps the goroutines and returns; default 30s.
	Grace time.Duration
}

// Errors Run reports; the scenarios' own failures are in the Result.
var (
	// ErrNoScenarios: the selection (beds, Tags and Match) holds no scenario at all.
	ErrNoScenarios = errors.New("no scenarios selected")
	// ErrTimeout is the cause of a bed's context ending at its Timeout.
	ErrTimeout = errors.New("bed timed out")
	// ErrHung: a bed's steps did not return within Grace of its context ending.
	ErrHung = errors.New("bed hung")
	// errFailFast is why scenarios after a failure did not run.
	errFailFast = errors.New("fail-fast: an earlier scenario did not pass")
	// errNotGreen is why the beds after one that is not green did not run.
	errNotGreen = errors.New("an earlier bed is not green")
)

// Run runs the beds of opts one after the other, strictly: an undefined, pending or
// ambiguous step fails its scenario. It stops at the first bed that is not green (Stopped
// names it): the beds after it are reported not run. It returns an error only when the run itself could not
// be carried out (what Check refuses, a hung bed, a report that could not be written);
// whether the beds passed is Result.OK.
func Run(ctx context.Context, opts Options) (Result, error) {
	o := withDefaults(opts)
	pl, err := prepare(o)
	if err != nil {
		return Result{}, err
	}
	if o.ReportDir != "" {
		if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
			return Result{}, fmt.Errorf("run beds: create report directory: %w", err)
		}
	}

	p := &printer{out: o.Out, color: o.Color}
	if c, ok := o.Out.(*Console); ok {
		p = c.p
	}
	start := time.Now()
	var res Result
	var runErr error
	stop := error(nil) // why the remaining beds do not run
	for i, b := range o.Beds {
		if stop == nil && ctx.Err() != nil {
			stop = context.Cause(ctx)
		}
		if stop != nil {
			p.println(p.paint(ansiDim, fmt.Sprintf("━━ %s · step %d · not run: %v", b.Name, b.Step, stop)))
			nr := notRun(b, pl.scenarios[i], stop, ctx.Err() != nil)
			nr.unselected = pl.unselected[i]
			res.Beds = append(res.Beds, nr)
			continue
		}
		br, err := runBed(ctx, b, pl.scenarios[i], pl.unselected[i], pl.paths[i], &o, p, pl.fsys[i])
		res.Beds = append(res.Beds, br)
		if err != nil {
			// A hung suite is still running; nothing after it can be trusted to run.
			runErr = err
			stop = err
		}
		if !br.OK() && !br.Interrupted() && stop == nil {
			// Each step builds on the one before: the release gate stops at the first
			// bed that is not green.
			stop = fmt.Errorf("%w: %s (step %d)", errNotGreen, b.Name, b.Step)
		}
	}
	res.Started, res.Elapsed = start, time.Since(start)
	if len(o.Beds) > 1 {
		p.runEnd(res)
	}
	var history *History
	if o.History != "" {
		if h, err := appendHistory(o.History, res); err != nil {
			runErr = errors.Join(runErr, err)
		} else {
			history = &h
		}
	}
	if o.ReportDir != "" {
		if err := writeReports(o.ReportDir, res, o.FeaturesDir, history); err != nil {
			runErr = errors.Join(runErr, err)
		} else {
			p.println(p.paint(ansiDim, "reports: "+strings.Join([]string{
				filepath.Join(o.ReportDir, SpecPageFile),
				filepath.Join(o.ReportDir, JUnitFile),
				filepath.Join(o.ReportDir, CucumberFile),
				filepath.Join(o.ReportDir, MeasurementsFile),
				filepath.Join(o.ReportDir, MatrixFile)}, " ")))
		}
	}
	return res, runErr
}

// withDefaults fills in what opts leaves unset.
func withDefaults(opts Options) Options {
	o := opts
	if o.FeaturesDir == "" {
		o.FeaturesDir = "features"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 30 * time.Second
	}
	return o
}

// Check refuses, before anything is raised, a run of opts that could not be carried out or
// would run nothing: no bed, a tag expression godog would misread, a feature file that is
// missing or does not parse, a selection (Tags and Match) that holds no scenario. Each error
// names what was wrong and what is valid. Run checks the same first.
func Check(opts Options) error {
	_, err := prepare(withDefaults(opts))
	return err
}

// runPlan is a run worked out before anything runs: per bed, its scenarios, the paths godog is
// given and the files it reads them from.
type runPlan struct {
	scenarios [][]Scenario
	// unselected are each bed's scenarios the selection (Tags, Match) left out.
	unselected [][]Scenario
	paths      [][]string
	fsys       []fs.FS
}

// prepare parses every bed's features first: a broken feature of the last bed must not cost
// a cluster.
func prepare(o Options) (runPlan, error) {
	var pl runPlan
	if o.History != "" {
		// A history the run could not append to would lose what it holds.
		if _, err := readHistory(o.History); err != nil {
			return pl, fmt.Errorf("run beds: %w", err)
		}
	}
	if len(o.Beds) == 0 {
		return pl, fmt.Errorf("run beds: %w: no bed given", ErrNoScenarios)
	}
	if err := checkTags(o.Tags); err != nil {
		return pl, fmt.Errorf("run beds: %w", err)
	}
	features := os.DirFS(o.FeaturesDir)
	total := 0
	for _, b := range o.Beds {
		s, err := Scenarios(features, b, o.Tags)
		if err != nil {
			return pl, fmt.Errorf("run beds: %w", err)
		}
		paths, fsys := b.Features, features
		if o.Match != nil {
			var hide map[string][]int
			s, paths, hide = narrow(s, o.Match)
			if fsys, err = hideRows(features, hide); err != nil {
				return pl, fmt.Errorf("run beds: bed %s: %w", b.Name, err)
			}
		}
		all, err := Scenarios(features, b, "")
		if err != nil {
			return pl, fmt.Errorf("run beds: %w", err)
		}
		pl.unselected = append(pl.unselected, slices.DeleteFunc(all, func(a Scenario) bool {
			return slices.ContainsFunc(s, func(sel Scenario) bool { return sel.Where() == a.Where() })
		}))
		pl.scenarios = append(pl.scenarios, s)
		pl.paths = append(pl.paths, paths)
		pl.fsys = append(pl.fsys, fsys)
		total += len(s)
	}
	if total == 0 {
		var by []string
		if o.Tags != "" {
			by = append(by, fmt.Sprintf("tags %q", o.Tags))
		}
		if o.Match != nil {
			by = append(by, fmt.Sprintf("run %q", o.Match))
		}
		valid := ""
		if o.Tags != "" {
			valid = "; the scenarios' tags: " + strings.Join(tagsOf(features, o.Beds), " ")
		}
		return pl, fmt.Errorf("run beds: %w (%s)%s", ErrNoScenarios,
			strings.Join(append(by, "in "+plural(len(o.Beds), "bed")), ", "), valid)
	}
	return pl, nil
}

// tagsOf lists, sorted, every tag a scenario of beds carries.
func tagsOf(features fs.FS, beds []Bed) []string {
	var out []string
	for _, b := range beds {
		s, _ := Scenarios(features, b, "")
		for _, sc := range s {
			for _, t := range sc.Tags {
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

// notRun is a bed skipped whole, each of its scenarios with the reason.
func notRun(b Bed, plan []Scenario, why error, interrupted bool) BedResult {
	br := BedResult{Bed: b, cut: interrupted}
	for _, s := range plan {
		br.Scenarios = append(br.Scenarios, &ScenarioResult{Scenario: s, Bed: b.Name, Status: NotRun, Err: why})
	}
	return br
}

// runBed runs one bed's godog suite under the bed's timeout. The error is non-nil only when
// the suite hung or panicked.
func runBed(ctx context.Context, b Bed, plan, unselected []Scenario, paths []string, o *Options, p *printer, features fs.FS) (BedResult, error) {
	br := BedResult{Bed: b, Started: time.Now(), Parallel: max(1, min(o.Parallel, len(plan))), unselected: unselected}
	p.bedStart(b, len(plan), o.Parallel)
	if len(plan) == 0 {
		p.println(p.paint(ansiDim, "  no scenario of "+b.Name+" is selected"))
		return br, nil
	}
	bctx, cancel := context.WithTimeoutCause(ctx, b.Timeout,
		fmt.Errorf("%w after %s", ErrTimeout, b.Timeout))
	defer cancel()

	t := newTracker(ctx, b, plan, o, p)
	suite := godog.TestSuite{
		Name:                 b.Name,
		TestSuiteInitializer: t.initSuite,
		ScenarioInitializer:  t.initScenario,
		Options: &godog.Options{
			FS:    features,
			Paths: paths,
			Tags:  o.Tags,
			// godog wants a formatter; the tracker is ours, so its output is discarded.
			Format:         "progress",
			Output:         io.Discard,
			NoColors:       true,
			Strict:         true,
			StopOnFailure:  o.FailFast,
			Concurrency:    max(1, o.Parallel),
			DefaultContext: bctx,
		},
	}

	type outcome struct {
		code int
		err  error
	}
	done := make(chan outcome, 1)
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	go t.heartbeat(o.Heartbeat, stopBeat)
	go func() {
		defer func() {
			// godog does not recover panics in hooks; one must not take the run down.
			if v := recover(); v != nil {
				done <- outcome{code: -1, err: fmt.Errorf("panic in a hook: %v\n%s", v, debug.Stack())}
			}
		}()
		done <- outcome{code: suite.Run()}
	}()

	var out outcome
	select {
	case out = <-done:
	case <-bctx.Done():
		select {
		case out = <-done:
		case <-time.After(o.Grace):
			out = outcome{code: -1, err: fmt.Errorf("%w: a step still ran %s after the bed's context ended (%v)",
				ErrHung, o.Grace, context.Cause(bctx))}
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	hung := errors.Is(out.err, ErrHung)
	if hung {
		t.hung(out.err)
		dumpGoroutines(o, b, p)
	} else {
		p.phase("after suite", time.Since(t.lastEnd))
	}
	for _, r := range t.all {
		if r.Status != NotRun || r.Err != nil {
			continue
		}
		switch {
		case len(r.Scenario.Steps) == 0:
			r.Status, r.Err = Undefined, errors.New("scenario has no steps")
		case bctx.Err() != nil:
			r.Err = context.Cause(bctx)
		case o.FailFast:
			r.Err = errFailFast
		default:
			r.Err = errors.New("godog did not run it")
		}
	}
	br.Scenarios = append([]*ScenarioResult(nil), t.all...)
	br.Elapsed = time.Since(br.Started)
	br.cut = ctx.Err() != nil
	switch {
	case out.err != nil:
		br.Err = out.err
	case errors.Is(context.Cause(bctx), ErrTimeout):
		br.Err = context.Cause(bctx)
	case out.code == 2:
		br.Err = fmt.Errorf("godog refused the options of bed %s", b.Name)
	case out.code != 0 && br.OK():
		br.Err = fmt.Errorf("godog reports a failure of bed %s the runner did not see", b.Name)
	}
	p.bedEnd(br, o.FeaturesDir)
	if hung || out.code == -1 {
		return br, fmt.Errorf("run bed %s: %w", b.Name, out.err)
	}
	return br, nil
}

// dumpGoroutines shows where a hung bed is stuck: into its report directory when there is
// one, else onto the progress output.
func dumpGoroutines(o *Options, b Bed, p *printer) {
	w := o.Out
	if o.ReportDir != "" {
		path := filepath.Join(o.ReportDir, b.Name, "goroutines.txt")
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			w = f
			p.println(p.paint(ansiRed, "  goroutines of the hung bed: "+path))
		}
	}
	_ = pprof.Lookup("goroutine").WriteTo(w, 2)
}
