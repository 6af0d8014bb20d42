package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/meshbus/mesh/beds"
)

// config is a parsed command line.
type config struct {
	// command is "run", "list", "images", "report" or "help".
	command string
	// dir is report's directory.
	dir string
	// target selects the beds to run or list: a name, a step, several, or "all".
	target   string
	report   string
	history  string
	tags     string
	match    *regexp.Regexp
	features string
	keep     bool
	failFast bool
	// parallel is --parallel: scenarios of a bed run at once; 0 when not given.
	parallel int
	steps    bool
	noColor  bool
}

// errHelp is returned by parse for -h and --help.
var errHelp = errors.New("help")

// parse reads the command line. Flags may come before or after the bed, as people type
// them: `bedrun genesis --report out` and `bedrun --report out genesis` are the same.
func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bedrun", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself, once
	fs.StringVar(&c.report, "report", "", "")
	fs.StringVar(&c.history, "history", "", "")
	fs.StringVar(&c.tags, "tags", "", "")
	fs.StringVar(&c.features, "features", "", "")
	fs.Func("run", "", func(v string) error {
		re, err := regexp.Compile(v)
		if err != nil {
			return fmt.Errorf("not a regular expression (Go's RE2 syntax, as go test -run: e.g. 'reload|torn', '^A change is live$'): %w", err)
		}
		c.match = re
		return nil
	})
	fs.IntVar(&c.parallel, "parallel", 0, "")
	fs.BoolVar(&c.keep, "keep", false, "")
	fs.BoolVar(&c.failFast, "fail-fast", false, "")
	fs.BoolVar(&c.steps, "steps", false, "")
	fs.BoolVar(&c.noColor, "no-color", false, "")

	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return c, errHelp
			}
			return c, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) == 0 {
		return c, errors.New("no bed given: name one (e.g. genesis or 1), or all")
	}
	c.command, pos = pos[0], pos[1:]
	switch c.command {
	case "help", "images":
		if len(pos) > 0 {
			return c, fmt.Errorf("%s takes no argument, got %q", c.command, strings.Join(pos, " "))
		}
	case "report":
		if len(pos) != 1 {
			return c, fmt.Errorf("report takes the directory of a run's report, got %q", strings.Join(pos, " "))
		}
		if c.report != "" || c.history != "" || c.tags != "" || c.match != nil || c.parallel != 0 || c.keep || c.failFast || c.steps {
			return c, errors.New("report takes no flags but --features: it renders again what a run wrote")
		}
		c.dir = pos[0]
	case "list":
		c.target = "all"
		if c.parallel != 0 {
			return c, errors.New("list takes no --parallel: it runs nothing")
		}
		if len(pos) > 1 {
			return c, fmt.Errorf("list takes at most one bed, got %q", strings.Join(pos, " "))
		}
		if len(pos) == 1 {
			c.target = pos[0]
		}
	default:
		if len(pos) > 0 {
			return c, fmt.Errorf("one bed argument at a time (use commas: %s,%s), got %q", c.command, pos[0], strings.Join(pos, " "))
		}
		c.command, c.target = "run", c.command
	}
	if c.parallel < 0 {
		return c, fmt.Errorf("--parallel %d: give how many scenarios of a bed run at once, 1 or more (1: one at a time)", c.parallel)
	}
	if c.features == "" {
		c.features = defaultFeatures()
	}
	return c, nil
}

// defaultFeatures is ./features, or the checkout's features directory when bedrun is started
// elsewhere in it.
func defaultFeatures() string {
	if fi, err := os.Stat("features"); err == nil && fi.IsDir() {
		return "features"
	}
	if root, err := moduleRoot(); err == nil {
		if rel, err := filepath.Rel(".", filepath.Join(root, "features")); err == nil {
			return rel
		}
	}
	return "features"
}

// color reports whether progress to w may be painted: a terminal, and no one asked otherwise
// (--no-color, NO_COLOR, TERM=dumb).
func (c config) color(w io.Writer) bool {
	if c.noColor || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `bedrun runs the beds: the acceptance suites of design 25 §10, each against a real
cluster raised in containers. Progress goes to stdout, the program's own logs to stderr.

Usage:
  bedrun BED [flags]           run beds: a name, a step number, several separated by commas
                               (genesis,2), or all; in step order
  bedrun list [BED] [flags]    the beds, their features and scenarios; raises nothing
  bedrun images                build the images the beds use, where missing or stale
  bedrun report DIR            render DIR/index.html again from the run DIR holds (its
                               messages.ndjson); raises nothing
  bedrun help                  this text

Flags (before or after BED):
  --report DIR     write DIR/index.html (the run as the living specification, for people:
                   one self-contained page, organised by the five steps, with filters and
                   search), DIR/messages.ndjson (the run as Cucumber Messages, the page's
                   source), DIR/junit.xml, DIR/cucumber.json, DIR/measurements.json and
                   DIR/matrix.json (the conformance bed's implementations by capability); a
                   failed scenario's evidence (container logs) goes to DIR/<bed>/<scenario>/
  --history FILE   append this run's verdicts and times to FILE (JSON, the newest 30 runs
                   kept; made if missing, refused before anything is raised if it is not a
                   history) and draw each bed's and scenario's trend on the page from it;
                   keep FILE between runs (CI: a cache) to see a scenario turn flaky or slow
  --tags EXPR      only scenarios matching godog's tag expression: "@a,@b" (or),
                   "@a && @b" (and), "~@a" (not); also filters list
  --run REGEXP     only scenarios whose name (with an outline's example values) matches,
                   like go test -run: an outline's rows one by one; a failed run prints the
                   --run that reruns exactly the scenarios and rows that did not pass
  --parallel N     run up to N scenarios of a bed at once (default: one more than the
                   cores, as memory allows, printed at start; 1: one at a time, the
                   default with --fail-fast, which otherwise lets those running end). Beds
                   still run in step order. Each scenario's start and end is a line, its
                   steps shown when it did not pass; the reports are a serial run's
  --fail-fast      stop at the first scenario that does not pass and leave its cluster up
                   as it was; how to reach it, and the command that removes it, are printed
                   at the end, and later runs leave it alone (an interrupted scenario's
                   cluster is torn down)
  --keep           leave the clusters up at the end and print how to reach them
  --features DIR   the feature files (default ./features, or the checkout's)
  --steps          list: show each scenario's steps too
  --report DIR     list: show each bed's and scenario's time in the run that wrote DIR
  --no-color       plain progress on a terminal too (also NO_COLOR=1)

Beds:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, b := range beds.All() {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", b.Step, b.Name, b.Summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Strict: an undefined, pending or ambiguous step fails its scenario. A scenario whose error
wraps an infrastructure error (Docker, an image build) is reported as an error, apart from
the product's failures.

Beds run in step order, and a run stops at the first bed that is not green, naming it:
the beds after it are reported not run (bedrun all is the release gate).

An interrupted scenario (SIGINT, SIGTERM) is reported as interrupted, not failed: in the
summary, in junit.xml (skipped, type "interrupted"), in cucumber.json (the step cut short
skipped, its error_message "interrupted: ...") and in the matrix (its cell "incomplete",
the scenario named). On SIGINT or SIGTERM the run stops and tears down; a second signal
exits at once.

Exit status, the release gate's answer:
  0    every selected scenario of every bed passed
  1    a bed is not green (a scenario failed, errored, was undefined, pending, ambiguous or
       skipped), or the run itself failed (a bed hung, a report not written)
  2    bad usage, refused before anything is raised: an unknown bed, a bad flag, a --tags
       that does not parse, a --run that does not compile, a --tags or --run that selects
       no scenario
  130  interrupted, after teardown

Examples:
  bedrun genesis --report out
  bedrun 1 --run 'live within one poll' --keep
  bedrun all --fail-fast --report out
  bedrun list --steps
`)
}
