package steps_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/steps"
)

// TestBeds runs every registered bed against real containers, as `bedrun
// all` does. Where no Docker engine answers it is skipped, saying so; CI
// has one. The progress goes to the test log (go test -v shows it live).
// The report, the living specification's page among it, goes to
// BED_REPORT_DIR (default: a temporary directory); BED_HISTORY names a
// history file the run appends to (bedrun's --history).
func TestBeds(t *testing.T) {
	if testing.Short() {
		t.Skip("beds skipped in -short mode: they raise real containers")
	}
	ctx, cancel := bedsContext(t)
	defer cancel()
	if err := harness.DockerAvailable(ctx); err != nil {
		t.Skipf("beds skipped: no Docker engine answers (%v)", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	features := filepath.Join(root, "features")
	set, err := beds.Lookup("all")
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report")
	if dir := os.Getenv("BED_REPORT_DIR"); dir != "" {
		report = dir
	}
	out := &testWriter{t: t}
	w := steps.New(steps.Options{Root: root, FeaturesDir: features, Out: out})
	defer func() {
		if err := w.Close(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("tear down: %v", err)
		}
	}()
	parallel, why := beds.DefaultParallel()
	t.Logf("up to %d scenarios of a bed at once (%s)", parallel, why)
	res, err := beds.Run(ctx, beds.Options{
		Beds:        set,
		Parallel:    parallel,
		FeaturesDir: features,
		ReportDir:   report,
		History:     os.Getenv("BED_HISTORY"),
		Out:         out,
		Suite:       w.InitSuite,
		Scenario:    w.InitScenario,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		if errors.Is(context.Cause(ctx), errOutOfTime) {
			t.Fatalf("%v; report in %s", context.Cause(ctx), report)
		}
		t.Fatalf("beds failed; report in %s", report)
	}
}

// stopBeforeDeadline is how long before go test's -timeout the beds are
// stopped: time to end the scenarios running and tear their clusters
// down, which the testing package's panic at the limit would not leave.
const stopBeforeDeadline = 45 * time.Second

// errOutOfTime is why the beds stopped when go test's limit came near.
var errOutOfTime = errors.New("the beds were stopped before go test's -timeout, so that their clusters are torn down")

// bedsContext is the beds' context: it ends stopBeforeDeadline before
// the test binary's deadline, if it has one, saying so and how to give
// the beds more time (a cold or slow machine: images to build, fewer
// cycles).
func bedsContext(t *testing.T) (context.Context, context.CancelFunc) {
	deadline, ok := t.Deadline()
	if !ok {
		return context.WithCancel(context.Background())
	}
	stop := deadline.Add(-stopBeforeDeadline)
	t.Logf("the beds stop by %s, %s before go test's -timeout", stop.Format(time.TimeOnly), stopBeforeDeadline)
	return context.WithDeadlineCause(context.Background(), stop,
		fmt.Errorf("%w (%s before it): give them longer on a cold or slow machine: go test -timeout 30m", errOutOfTime, stopBeforeDeadline))
}

// testWriter sends the runner's progress to the test log, line by line.
type testWriter struct {
	t    *testing.T
	part string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.part += string(p)
	for {
		i := strings.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(w.part[:i])
		w.part = w.part[i+1:]
	}
}
