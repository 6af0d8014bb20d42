package main

import (
	"context"
	"io"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/steps"
)

// teardownTimeout bounds the steps' closer, which runs after the run's context may have
// ended.
const teardownTimeout = 2 * time.Minute

// stepOptions is what the step definitions are told about the run.
type stepOptions struct {
	// FeaturesDir is where the feature files and their testdata are.
	FeaturesDir string
	// ReportDir is the --report directory, or "" (the steps find their per-scenario
	// directory with beds.ArtifactDir).
	ReportDir string
	// Keep leaves the clusters up at the end and prints how to reach them (--keep).
	Keep bool
	// FailFast is set with --fail-fast: the failed scenario's cluster is kept up and how
	// to reach it printed at the end.
	FailFast bool
	// Out is the progress output (a beds.Console), for the steps' narration and how to
	// reach a kept cluster: each line comes out indented under the step in progress.
	Out io.Writer
}

// bindSteps binds the step definitions of package steps: suite and scenario go to godog
// (beds.Options.Suite and .Scenario), closer ends what the run raised and runs after the
// last bed, even after an interrupt.
func bindSteps(o stepOptions) (suite func(*godog.TestSuiteContext), scenario func(*godog.ScenarioContext), closer func() error) {
	w := steps.New(o.steps())
	return w.InitSuite, w.InitScenario, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		defer cancel()
		return w.Close(ctx)
	}
}

// steps is what the step definitions are told: --keep and --fail-fast both reach them.
func (o stepOptions) steps() steps.Options {
	return steps.Options{FeaturesDir: o.FeaturesDir, Keep: o.Keep, FailFast: o.FailFast, Out: o.Out}
}
