package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshbus/mesh/beds"
)

// list is `bedrun list`: each bed, its features and their scenarios, parsed with godog's own
// parser and filtered by --tags and --run as a run would be. It raises nothing. It fails (1) when a
// feature file is missing or does not parse, so CI can run it as a cheap first check.
func list(cfg config, stdout, stderr io.Writer) int {
	selected, err := beds.All().Lookup(cfg.target)
	if err != nil {
		fmt.Fprintf(stderr, "bedrun: %v\n", err)
		return exitUsage
	}
	features := os.DirFS(cfg.features)
	last, err := lastTimes(cfg.report)
	if err != nil {
		fmt.Fprintf(stderr, "bedrun: %v\n", err)
		return exitUsage
	}
	code := exitPass
	for i, b := range selected {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		head := fmt.Sprintf("%d  %s", b.Step, b.Name)
		if len(b.Aliases) > 0 {
			head += " (" + strings.Join(b.Aliases, ", ") + ")"
		}
		fmt.Fprintf(stdout, "%s · owner %s · timeout %s\n   %s\n", head, b.Owner, b.Timeout, b.Summary)
		if bt, ok := last.beds[b.Name]; ok {
			at := "one at a time"
			if bt.Parallel > 1 {
				at = strconv.Itoa(bt.Parallel) + " at once"
			}
			fmt.Fprintf(stdout, "   last run: %s, %s; in scenarios %s: raising %s, steps %s, teardown %s\n",
				seconds(bt.Seconds), at, seconds(bt.ScenarioSeconds), seconds(bt.Raising), seconds(bt.Steps), seconds(bt.Teardown))
		}
		fmt.Fprintf(stdout, "   raises: %s\n", strings.ReplaceAll(b.TopologyOrDefault().String(), "\n", "\n           "))
		for _, bus := range slices.Sorted(maps.Keys(b.OnBus)) {
			fmt.Fprintf(stdout, "   and for a scenario on %s: %s\n", bus, strings.ReplaceAll(b.OnBus[bus].String(), "\n", "\n           "))
		}
		scenarios, err := beds.Scenarios(features, b, cfg.tags)
		if errors.Is(err, beds.ErrBadTags) {
			fmt.Fprintf(stderr, "bedrun: %v\n", err)
			return exitUsage
		}
		if err != nil {
			fmt.Fprintf(stdout, "   ✗ %v\n", err)
			code = exitFail
			continue
		}
		scenarios = beds.Select(scenarios, cfg.match)
		for _, f := range b.Features {
			var in []beds.Scenario
			for _, s := range scenarios {
				if s.Feature == f {
					in = append(in, s)
				}
			}
			shared := sharedTags(in)
			line := fmt.Sprintf("   %s · %d scenarios", filepath.Join(cfg.features, f), len(in))
			if len(shared) > 0 {
				line += " · " + strings.Join(shared, " ")
			}
			fmt.Fprintln(stdout, line)
			if len(in) == 0 && (cfg.tags != "" || cfg.match != nil) {
				fmt.Fprintln(stdout, "     (none selected by --tags or --run)")
			}
			for _, s := range in {
				line := fmt.Sprintf("     :%-4d %s", s.Line, s.Title())
				if st, ok := last.scenarios[path.Base(s.Where())]; ok {
					line = fmt.Sprintf("     :%-4d %7s%s %s", s.Line, seconds(st.Seconds), lastMark(st.Status), s.Title())
				} else if cfg.report != "" {
					line = fmt.Sprintf("     :%-4d %7s  %s", s.Line, "–", s.Title())
				}
				if own := ownTags(s.Tags, shared); len(own) > 0 {
					line += "  " + strings.Join(own, " ")
				}
				fmt.Fprintln(stdout, line)
				if cfg.steps {
					for _, st := range s.Steps {
						fmt.Fprintf(stdout, "             %s\n", st)
					}
				}
			}
		}
	}
	return code
}

// sharedTags are the tags every scenario of a feature has (the feature's own, mostly):
// printed once on the feature's line rather than on each scenario.
func sharedTags(ss []beds.Scenario) []string {
	if len(ss) == 0 {
		return nil
	}
	var out []string
	for _, t := range ss[0].Tags {
		all := true
		for _, s := range ss[1:] {
			all = all && slices.Contains(s.Tags, t)
		}
		if all && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func ownTags(tags, shared []string) []string {
	var out []string
	for _, t := range tags {
		if !slices.Contains(shared, t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// times is a last run's report, read for list: each bed's and scenario's time.
type times struct {
	beds      map[string]beds.BedTiming
	scenarios map[string]beds.ScenarioTiming // by feature file and line
}

// lastTimes reads the times of the run that wrote the report directory dir; none when dir is "".
func lastTimes(dir string) (times, error) {
	t := times{beds: map[string]beds.BedTiming{}, scenarios: map[string]beds.ScenarioTiming{}}
	if dir == "" {
		return t, nil
	}
	tm, err := beds.ReadTimings(dir)
	if err != nil {
		return t, err
	}
	for _, b := range tm.Beds {
		t.beds[b.Bed] = b
		for _, s := range b.Scenarios {
			t.scenarios[path.Base(s.Where)] = s
		}
	}
	return t, nil
}

// seconds renders a time from a report at a glance: 0.4s, 12.3s, 2m13s.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// lastMark marks a time whose scenario did not pass, last run.
func lastMark(status string) string {
	if status == beds.Passed.String() {
		return " "
	}
	return "✗"
}
