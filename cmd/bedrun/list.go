package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
