// Command bedrun runs the beds: the executable acceptance suites of design 25 §10, each
// raising a real cluster in containers. `bedrun help` says how.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness/images"
)

// Exit statuses.
const (
	exitPass        = 0   // every selected scenario passed
	exitFail        = 1   // a bed is not green, or the run itself failed
	exitUsage       = 2   // bad usage, refused before anything is raised
	exitInterrupted = 130 // SIGINT or SIGTERM, after teardown
)

// errInterrupted is the cause of the run's context ending on a signal.
var errInterrupted = errors.New("interrupted")

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go onSignals(sigs, cancel, os.Exit, os.Stderr)
	os.Exit(run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, bind: bindSteps}))
}

// onSignals cancels the run at the first signal, so the steps' hooks tear down, and exits at
// once at the second, giving up on teardown.
func onSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, exit func(int), stderr io.Writer) {
	s := <-sigs
	fmt.Fprintf(stderr, "\nbedrun: %s: tearing down; %s again to exit at once\n", s, s)
	cancel(fmt.Errorf("%w by %s", errInterrupted, s))
	s = <-sigs
	fmt.Fprintf(stderr, "bedrun: %s: exiting without teardown; the next run removes what this one left\n", s)
	exit(exitInterrupted)
}

// env is what bedrun runs against: its outputs and the binding of the step definitions,
// which tests replace with their own.
type env struct {
	stdout, stderr io.Writer
	bind           func(stepOptions) (func(*godog.TestSuiteContext), func(*godog.ScenarioContext), func() error)
}

// run is bedrun without the process around it: tests call it.
func run(ctx context.Context, args []string, e env) int {
	stdout, stderr := e.stdout, e.stderr
	cfg, err := parse(args)
	if errors.Is(err, errHelp) {
		usage(stdout)
		return exitPass
	}
	if err != nil {
		fmt.Fprintf(stderr, "bedrun: %v\nRun 'bedrun help' for usage.\n", err)
		return exitUsage
	}
	switch cfg.command {
	case "help":
		usage(stdout)
		return exitPass
	case "list":
		return list(cfg, stdout, stderr)
	case "images":
		return buildImages(ctx, stderr)
	case "report":
		return renderReport(cfg.dir, stdout, stderr)
	}
	return runBeds(ctx, cfg, e)
}

// runBeds runs the beds cfg selects, with the step definitions bound.
func runBeds(ctx context.Context, cfg config, e env) int {
	stdout, stderr := e.stdout, e.stderr
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("prog", "bedrun")
	selected, err := beds.All().Lookup(cfg.target)
	if err != nil {
		fmt.Fprintf(stderr, "bedrun: %v\n", err)
		return exitUsage
	}
	parallel, why := cfg.parallel, "--parallel"
	switch {
	case parallel == 0 && cfg.failFast:
		// Stopping at the first failure means not starting the next scenario while it runs.
		parallel, why = 1, "--fail-fast without --parallel"
	case parallel == 0:
		parallel, why = beds.DefaultParallel()
	}
	opts := beds.Options{
		Beds:           selected,
		Parallel:       parallel,
		FeaturesDir:    cfg.features,
		Tags:           cfg.tags,
		Match:          cfg.match,
		FailFast:       cfg.failFast,
		ReportDir:      cfg.report,
		History:        cfg.history,
		Infrastructure: []error{images.ErrInfrastructure},
	}
	// Bad input is refused before the steps are bound, so nothing is raised for it.
	if err := beds.Check(opts); err != nil {
		return refused(stderr, err)
	}
	// One console for the runner and the steps, so the harness's narration is indented
	// under the step it belongs to and never breaks a line of the runner's.
	console := beds.NewConsole(stdout, cfg.color(stdout))
	if parallel == 1 {
		fmt.Fprintf(stdout, "bedrun: one scenario at a time (%s)\n", why)
	} else {
		fmt.Fprintf(stdout, "bedrun: up to %d scenarios of a bed at once (%s; --parallel N to change)\n", parallel, why)
	}
	suite, scenario, closer := e.bind(stepOptions{
		FeaturesDir: cfg.features,
		ReportDir:   cfg.report,
		Keep:        cfg.keep,
		FailFast:    cfg.failFast,
		Out:         console,
	})
	opts.Out, opts.Suite, opts.Scenario = console, suite, scenario
	res, err := beds.Run(ctx, opts)
	// Teardown of whatever the steps still hold runs even after an interrupt, with its own
	// deadline; a second signal cuts it short.
	if closer != nil {
		if cerr := closer(); cerr != nil {
			log.Error("tear down", "err", cerr)
			err = errors.Join(err, cerr)
		}
	}
	if errors.Is(err, beds.ErrBadTags) || errors.Is(err, beds.ErrNoScenarios) {
		return refused(stderr, err)
	}
	if err != nil {
		log.Error("run beds", "err", err)
	}
	rerun(stdout, res)
	if errors.Is(context.Cause(ctx), errInterrupted) {
		return exitInterrupted
	}
	if err != nil || !res.OK() {
		return exitFail
	}
	return exitPass
}

// refused reports bad input that Check (or Run) turned down before anything ran.
func refused(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "bedrun: %v\n", err)
	if errors.Is(err, beds.ErrNoScenarios) {
		fmt.Fprintln(stderr, "Run 'bedrun list' to see the scenarios and their tags.")
	}
	return exitUsage
}

// rerun prints, per bed, the command that runs again just the scenarios that did not pass.
func rerun(w io.Writer, res beds.Result) {
	for _, b := range res.Beds {
		var alts []string
		for _, s := range b.Scenarios {
			if s.Status != beds.Passed && s.Status != beds.NotRun {
				alts = append(alts, regexp.QuoteMeta(s.Title()))
			}
		}
		if len(alts) == 0 || len(alts) > 5 {
			continue
		}
		re := "^(" + strings.Join(alts, "|") + ")$"
		fmt.Fprintf(w, "rerun: bedrun %s --run '%s'\n", b.Bed.Name, strings.ReplaceAll(re, "'", `'\''`))
	}
}

// renderReport renders a report directory's page again from the run it holds.
func renderReport(dir string, stdout, stderr io.Writer) int {
	if _, err := os.Stat(filepath.Join(dir, beds.MessagesFile)); err != nil {
		fmt.Fprintf(stderr, "bedrun: report %s: no %s there: give the directory a run's --report wrote (%v)\n", dir, beds.MessagesFile, err)
		return exitUsage
	}
	if err := beds.RenderReport(dir); err != nil {
		fmt.Fprintf(stderr, "bedrun: report %s: %v\n", dir, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, beds.SpecPageFile))
	return exitPass
}
