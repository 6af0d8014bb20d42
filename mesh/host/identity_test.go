package host

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestParseIDRange(t *testing.T) {
	for in, want := range map[string]string{"50000-59999": "", "7-7": "", "0-10": "above 0", "9-8": "not above LAST", "50000": "FIRST-LAST", "a-b": "FIRST-LAST", "1-99999999999": "FIRST-LAST"} {
		r, err := ParseIDRange(in)
		switch {
		case want == "" && (err != nil || r.String() != in):
			t.Errorf("%q: %v, %v", in, r, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: expected a refusal saying %q, got %v", in, want, err)
		}
	}
}

// TestIdentitiesAreAllottedOnceEachAndKept: each module its own id, the
// same when asked again by a host started again, none given twice, and a
// span used up or a kept allotment out of it refused with what to do.
func TestIdentitiesAreAllottedOnceEachAndKept(t *testing.T) {
	st := State{Dir: t.TempDir()}
	ids := &identities{state: st, span: IDRange{First: 100, Last: 101}}
	a, err := ids.of("a")
	if err != nil || a != (Identity{100, 100}) {
		t.Fatalf("a: %v, %v", a, err)
	}
	b, _ := ids.of("b")
	if b != (Identity{101, 101}) {
		t.Fatalf("b: %v", b)
	}
	again := &identities{state: st, span: IDRange{First: 100, Last: 101}}
	if got, _ := again.of("a"); got != a {
		t.Fatalf("a after a restart: %v, was %v", got, a)
	}
	if _, err := again.of("c"); err == nil || !strings.Contains(err.Error(), "--module-ids") {
		t.Fatalf("a third module in a span of two: %v", err)
	}
	narrowed := &identities{state: st, span: IDRange{First: 101, Last: 200}}
	if _, err := narrowed.of("c"); err == nil || !strings.Contains(err.Error(), "module a has id 100, outside the span 101-200") {
		t.Fatalf("an allotment outside the span: %v", err)
	}
	if err := os.WriteFile(filepath.Join(st.Dir, identitiesFile), []byte(`{"a":100,"b":100}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := again.of("a"); err == nil || !strings.Contains(err.Error(), "same id 100") {
		t.Fatalf("one id kept for two modules: %v", err)
	}
}

// TestAClosedDirectoryOnTheWayIsNamed: a module could not reach what is
// under a directory other users may not enter; the host names it.
func TestAClosedDirectoryOnTheWayIsNamed(t *testing.T) {
	closed := filepath.Join(testutil.OpenTempDir(t), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	err := reachable(filepath.Join(closed, "state", "modules"))
	if !errors.Is(err, ErrIsolation) || !strings.Contains(err.Error(), closed+" is on the way") {
		t.Fatalf("expected the closed directory named, got %v", err)
	}
	if err := os.Chmod(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := reachable(filepath.Join(closed, "state", "modules")); err != nil {
		t.Fatalf("entered but not listed is enough: %v", err)
	}
}

// TestTheHostsNamesAreNoModules: the host's own entries of its programs
// directory are reserved names, and a declaration naming a module so is
// not run.
func TestTheHostsNamesAreNoModules(t *testing.T) {
	for _, name := range []string{DefaultProgram, HostProgram} {
		if !slices.Contains(wire.ReservedModuleNames, name) {
			t.Errorf("%s is not among the reserved module names %v", name, wire.ReservedModuleNames)
		}
	}
	s := &supervisor{programs: t.TempDir(), state: State{Dir: t.TempDir()}}
	for _, name := range wire.ReservedModuleNames {
		if err := s.set(wire.Declaration{Node: "node-a", Revision: 1, Modules: []string{name}}); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("module %s: %v", name, err)
		}
	}
}
