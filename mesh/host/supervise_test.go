package host

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/wire"
)

// newSupervisor is a supervisor whose programs directory (returned) and
// state other users may enter, as its modules run as identities of
// their own.
func newSupervisor(t *testing.T) (*supervisor, string) {
	t.Helper()
	testutil.RequireRoot(t)
	root := testutil.OpenTempDir(t)
	dir := filepath.Join(root, "programs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state := State{Dir: filepath.Join(root, "state")}
	if err := state.open(); err != nil {
		t.Fatal(err)
	}
	if err := preflight(dir, state); err != nil {
		t.Fatal(err)
	}
	return &supervisor{programs: dir, state: state, ids: &identities{state: state, span: IDRange{First: 61000, Last: 61009}}, node: "node-a", log: slog.New(slog.DiscardHandler)}, dir
}

func script(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
}

func (s *supervisor) pidOf(module string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[module]
	if !ok {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// TestTheSupervisorRunsEachModuleAsItsOwnProcess: each declared module
// runs from its program (or the default one) with its own credential
// path; one that keeps crashing is started again; one no longer declared
// is stopped; a new version is a new process.
func TestTheSupervisorRunsEachModuleAsItsOwnProcess(t *testing.T) {
	s, dir := newSupervisor(t)
	script(t, dir, DefaultProgram, `echo "$MESH_MODULE $MESH_NODE $MESH_CREDENTIAL" >> env; exec sleep 600`)
	script(t, dir, "crasher", `echo crash >> crashes; exit 3`)
	env := filepath.Join(s.state.ModuleHome("sensor"), "env")
	defer s.stopAll()

	if err := s.set(wire.Declaration{Node: "node-a", Revision: 1, Modules: []string{"sensor", "crasher"}, Versions: map[string]string{"sensor": "1.0"}}); err != nil {
		t.Fatal(err)
	}
	s.started([]string{"sensor"}, 5*time.Second)
	if got := s.running(); got["sensor"] != "1.0" {
		t.Fatalf("running %v, want sensor 1.0", got)
	}
	waitFor(t, 10*time.Second, "the crasher started three times", func() bool {
		b, _ := os.ReadFile(filepath.Join(s.state.ModuleHome("crasher"), "crashes"))
		return strings.Count(string(b), "crash") >= 3
	})
	b, _ := os.ReadFile(env)
	if want := "sensor node-a " + s.state.ModuleCredential("sensor"); !strings.Contains(string(b), want) {
		t.Fatalf("the module's environment was %q, want %q", b, want)
	}
	first := s.pidOf("sensor")

	// The crasher no longer declared; sensor at a new version.
	if err := s.set(wire.Declaration{Node: "node-a", Revision: 2, Modules: []string{"sensor"}, Versions: map[string]string{"sensor": "2.0"}}); err != nil {
		t.Fatal(err)
	}
	s.started([]string{"sensor"}, 5*time.Second)
	if got := s.running(); len(got) != 1 || got["sensor"] != "2.0" {
		t.Fatalf("running %v, want sensor 2.0 alone", got)
	}
	if again := s.pidOf("sensor"); again == first || again == 0 {
		t.Fatalf("sensor's process is %d, was %d: a new version is a new process", again, first)
	}
	if err := s.set(wire.Declaration{Node: "node-a", Revision: 3, Modules: []string{"unknown-elsewhere"}}); err != nil {
		t.Fatal(err) // the default program runs it
	}
	if err := os.Remove(filepath.Join(dir, DefaultProgram)); err != nil {
		t.Fatal(err)
	}
	if err := s.set(wire.Declaration{Node: "node-a", Revision: 4, Modules: []string{"other"}}); err == nil {
		t.Fatal("a module with no program was taken")
	}
}

// TestAModuleIsGivenItsDeclaredConfiguration: a module declared a
// configuration finds it in the file wire.EnvConfig names (0600); a new
// configuration is a new process reading the new one; a module declared
// none is given no such variable.
func TestAModuleIsGivenItsDeclaredConfiguration(t *testing.T) {
	s, dir := newSupervisor(t)
	script(t, dir, DefaultProgram, `echo "$MESH_MODULE ${MESH_CONFIG:-none} $(cat "${MESH_CONFIG:-/dev/null}")" >> seen; exec sleep 600`)
	defer s.stopAll()
	seenBy := func(mod string) string {
		b, _ := os.ReadFile(filepath.Join(s.state.ModuleHome(mod), "seen"))
		return string(b)
	}
	d := wire.Declaration{Node: "node-a", Revision: 1, Modules: []string{"mesh-catalog", "sensor"},
		Config: map[string]json.RawMessage{"mesh-catalog": json.RawMessage(`{"tools":[]}`)}}
	if err := s.set(d); err != nil {
		t.Fatal(err)
	}
	path := s.state.moduleConfig("mesh-catalog")
	waitFor(t, 5*time.Second, "both modules started", func() bool {
		return strings.Contains(seenBy("mesh-catalog"), "mesh-catalog "+path+` {"tools":[]}`) && strings.Contains(seenBy("sensor"), "sensor none")
	})
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o440 {
		t.Fatalf("the configuration file: %v, %v", info, err)
	}
	first, sensor := s.pidOf("mesh-catalog"), s.pidOf("sensor")
	d.Revision, d.Config = 2, map[string]json.RawMessage{"mesh-catalog": json.RawMessage(`{"tools":[{"module":"x"}]}`)}
	if err := s.set(d); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the catalogue started again with the new configuration", func() bool {
		return strings.Contains(seenBy("mesh-catalog"), `{"tools":[{"module":"x"}]}`)
	})
	if again := s.pidOf("mesh-catalog"); again == first {
		t.Error("a new configuration did not start a new process")
	}
	if s.pidOf("sensor") != sensor {
		t.Error("a module whose configuration did not change was started again")
	}
}
