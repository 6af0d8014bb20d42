package steps

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/topology"
)

// fakeSession records what the World does with a cluster's session.
type fakeSession struct {
	id           string
	kept, closed int
}

func (f *fakeSession) ID() string                  { return f.id }
func (f *fakeSession) Keep() error                 { f.kept++; return nil }
func (f *fakeSession) Close(context.Context) error { f.closed++; return nil }

func fakeRaised(id, meshFile string) (*raised, *fakeSession) {
	s := &fakeSession{id: id}
	return &raised{meshFile: meshFile, session: s, describe: func() string {
		return "cluster of run " + id + ":\n  remove:        docker rm -f $(docker ps -aq --filter label=mesh.run=" + id + ")\n"
	}}, s
}

// TestFailFastKeepsTheFailedCluster: with FailFast the cluster a scenario failed on is kept
// up as it is, marked kept at once, and described at Close; the others are torn down.
func TestFailFastKeepsTheFailedCluster(t *testing.T) {
	var out bytes.Buffer
	w := New(Options{FailFast: true, Out: &out})
	failed, fs := fakeRaised("abc123", "genesis.yaml")
	clean, cs := fakeRaised("def456", "other.yaml")
	failed.key, clean.key = "genesis.yaml", "other.yaml"
	w.leased[failed], w.idle["other.yaml"] = true, []*raised{clean}

	if err := w.release(context.Background(), failed, `"A change is live" at 1-genesis.feature:7`); err != nil {
		t.Fatal(err)
	}
	if fs.kept != 1 || fs.closed != 0 {
		t.Fatalf("expected the failed cluster marked kept at release and not closed, got kept %d closed %d", fs.kept, fs.closed)
	}
	if len(w.idle["genesis.yaml"]) != 0 || w.leased[failed] {
		t.Fatal("expected the failed cluster no longer offered to later scenarios")
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fs.closed != 0 || cs.closed != 1 {
		t.Fatalf("expected Close to tear down the clean cluster alone, got failed closed %d, clean closed %d", fs.closed, cs.closed)
	}
	for _, want := range []string{
		`kept cluster run=abc123 of the failed scenario "A change is live" at 1-genesis.feature:7 (--fail-fast; raised from genesis.yaml; later runs leave it alone):`,
		"docker rm -f $(docker ps -aq --filter label=mesh.run=abc123)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("expected Close to print %q, got\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "def456") {
		t.Errorf("expected the torn-down cluster not described")
	}
}

// TestReleaseTearsDownOtherwise: without FailFast, or for a scenario that did not fail, a
// tainted cluster is torn down and an untainted one stays for the next scenario.
func TestReleaseTearsDownOtherwise(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failFast bool
		failed   string
		tainted  bool
		closed   int
	}{
		{"failed without fail-fast", false, `"x"`, true, 1},
		{"passed but tainted, fail-fast", true, "", true, 1},
		{"passed and clean, fail-fast", true, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Options{FailFast: tc.failFast})
			r, s := fakeRaised("abc123", "m.yaml")
			r.tainted = tc.tainted
			w.leased[r] = true
			if err := w.release(context.Background(), r, tc.failed); err != nil {
				t.Fatal(err)
			}
			if s.closed != tc.closed || s.kept != 0 {
				t.Fatalf("expected closed %d, not kept; got closed %d, kept %d", tc.closed, s.closed, s.kept)
			}
			if offered := len(w.idle["m.yaml"]) == 1; offered == tc.tainted || w.leased[r] {
				t.Fatalf("expected the cluster offered again: %v, got %v (still leased: %v)", !tc.tainted, offered, w.leased[r])
			}
		})
	}
}

// TestAClusterIsLeasedToOneScenarioAtATime: a cluster held by a scenario is
// offered to no other; released clean it is leased again, tainted never.
func TestAClusterIsLeasedToOneScenarioAtATime(t *testing.T) {
	ctx := context.Background()
	w := New(Options{})
	top := topology.Genesis()
	a, as := fakeRaised("aaa", "m.yaml")
	a.key = "m.yaml\n" + top.String()
	w.idle[a.key] = []*raised{a}

	got, err := w.acquire(ctx, "m.yaml", top, "")
	if err != nil || got != a {
		t.Fatalf("expected the free cluster leased, got %v, %v", got, err)
	}
	if len(w.idle[a.key]) != 0 || !w.leased[a] {
		t.Fatal("expected the leased cluster no longer free")
	}
	if err := w.release(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	if len(w.idle[a.key]) != 1 || w.leased[a] {
		t.Fatal("expected the clean cluster free again once released")
	}
	if got, err = w.acquire(ctx, "m.yaml", top, ""); err != nil || got != a {
		t.Fatalf("expected the clean cluster leased again, got %v, %v", got, err)
	}
	a.tainted = true
	if err := w.release(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	if len(w.idle[a.key]) != 0 || w.leased[a] || as.closed != 1 {
		t.Fatalf("expected the tainted cluster torn down, not offered; closed %d", as.closed)
	}
}

// TestFailureIsNotAnInterrupt: fail-fast keeps the evidence of a failure, never of a
// scenario the run's interrupt cut short.
func TestFailureIsNotAnInterrupt(t *testing.T) {
	sc := &godog.Scenario{Name: "A change is live"}
	boom := errors.New("expected 5 users, got 4")
	if got := failure(context.Background(), sc, nil); got != "" {
		t.Errorf("a scenario that passed: expected no failure, got %q", got)
	}
	if got := failure(context.Background(), sc, boom); got != `"A change is live"` {
		t.Errorf("a failure outside a run: expected its name, got %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := failure(ctx, sc, boom); got != "" {
		t.Errorf("an interrupted scenario: expected no failure, got %q", got)
	}

	// Within a run: the row's title and where it is; and an interrupt is not a failure.
	dir := t.TempDir()
	feature := `Feature: F
  Scenario Outline: A user is refused
    Given a step <does>
    Examples:
      | does  |
      | fails |
      | stops |
`
	if err := os.WriteFile(filepath.Join(dir, "f.feature"), []byte(feature), 0o644); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	var seen []string
	_, err := beds.Run(runCtx, beds.Options{
		Beds:        []beds.Bed{{Name: "f", Step: 1, Owner: "bus", Summary: "f", Features: []string{"f.feature"}, Timeout: time.Minute}},
		FeaturesDir: dir,
		Scenario: func(s *godog.ScenarioContext) {
			s.Step(`^a step fails$`, func() error { return boom })
			s.Step(`^a step stops$`, func(ctx context.Context) error {
				stop(errors.New("interrupted by test"))
				return context.Cause(ctx)
			})
			s.After(func(ctx context.Context, sc *godog.Scenario, err error) (context.Context, error) {
				seen = append(seen, failure(ctx, sc, err))
				return ctx, nil
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"A user is refused (fails)" at f.feature:6`, ""}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("expected %q, got %q", want, seen)
	}
}

// TestModulesAsTheirOwn: each module a child of the host, as a user and
// group of its own; root, the host's user or a sibling's is refused.
func TestModulesAsTheirOwn(t *testing.T) {
	procs := func(sensorUID, loggerUID int) []harness.Process {
		return []harness.Process{
			{PID: 1, PPID: 0, Command: "/mesh-host run", UID: 0, GID: 0},
			{PID: 7, PPID: 1, Command: "mesh-module-sensor", UID: sensorUID, GID: sensorUID},
			{PID: 8, PPID: 1, Command: "mesh-module-logger", UID: loggerUID, GID: loggerUID},
		}
	}
	if err := modulesAsTheirOwn(procs(50000, 50001), []string{"sensor", "logger"}); err != nil {
		t.Fatal(err)
	}
	for name, ps := range map[string][]harness.Process{"as root": procs(0, 50001), "shared": procs(50000, 50000), "unread": procs(-1, 50001)} {
		if err := modulesAsTheirOwn(ps, []string{"sensor", "logger"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := modulesAsTheirOwn(procs(50000, 50001), []string{"sensor", "relay"}); err == nil || !strings.Contains(err.Error(), "relay") {
		t.Errorf("a module not running: %v", err)
	}
}

// TestABedsIdleClustersGoAtItsEnd: the clusters no scenario holds are torn
// down when a bed ends, or kept aside with Keep; a held one stays.
func TestABedsIdleClustersGoAtItsEnd(t *testing.T) {
	for _, keep := range []bool{false, true} {
		w := New(Options{Keep: keep})
		idle, is := fakeRaised("aaa", "m.yaml")
		held, hs := fakeRaised("bbb", "m.yaml")
		w.idle["m.yaml"], w.leased[held] = []*raised{idle}, true
		if err := w.closeIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if keep && (is.closed != 0 || len(w.retired) != 1) || !keep && is.closed != 1 {
			t.Errorf("keep %v: expected the idle cluster closed unless kept, got closed %d, retired %d", keep, is.closed, len(w.retired))
		}
		if hs.closed != 0 || !w.leased[held] || len(w.idle["m.yaml"]) != 0 {
			t.Errorf("keep %v: expected the held cluster left alone and nothing idle", keep)
		}
	}
}
