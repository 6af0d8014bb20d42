package build

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

func request(module, revision string) wire.BuildRequest {
	return wire.BuildRequest{ID: wire.BuildID("modules", module, revision), Repo: "modules", Module: module, Revision: revision}
}

func TestAssembleIsDeterministicAndReadBack(t *testing.T) {
	base := []byte("\x7fELF pretend program")
	r1 := Assemble(base, request("sensor", "r1"), []byte("v1"))
	if again := Assemble(base, request("sensor", "r1"), []byte("v1")); !bytes.Equal(r1, again) {
		t.Fatal("expected the same revision to assemble to the same bytes, got two artifacts")
	}
	if !bytes.HasPrefix(r1, base) {
		t.Fatal("expected the artifact to begin with the program")
	}
	others := map[string][]byte{
		"another revision": Assemble(base, request("sensor", "r2"), []byte("v1")),
		"another content":  Assemble(base, request("sensor", "r1"), []byte("v2")),
		"another module":   Assemble(base, request("pump", "r1"), []byte("v1")),
		"another program":  Assemble([]byte("other"), request("sensor", "r1"), []byte("v1")),
	}
	for what, a := range others {
		if wire.Digest(a) == wire.Digest(r1) {
			t.Errorf("%s: expected another digest, got the same %s", what, wire.Digest(a))
		}
	}
	p, err := ReadProvenance(r1)
	if err != nil {
		t.Fatal(err)
	}
	want := Provenance{Repo: "modules", Module: "sensor", Revision: "r1", Program: wire.Digest(base), Content: []byte("v1")}
	if p.Repo != want.Repo || p.Module != want.Module || p.Revision != want.Revision || p.Program != want.Program || !bytes.Equal(p.Content, want.Content) {
		t.Fatalf("expected %+v, got %+v", want, p)
	}
	if p.ID() != "modules/sensor@r1" {
		t.Fatalf("expected id modules/sensor@r1, got %s", p.ID())
	}
}

func TestReadProvenanceRefuses(t *testing.T) {
	base := []byte("program")
	good := Assemble(base, request("sensor", "r1"), []byte("v1"))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0xff
		return b
	}
	long := bytes.Clone(good)
	copy(long[len(long)-footerSize:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	cases := map[string]struct {
		data []byte
		want string
	}{
		"no trailer":       {base, "no trailer"},
		"empty":            {nil, "no trailer"},
		"program changed":  {flip(0), "the record names program"},
		"length too large": {long, "the trailer says its record is"},
		"record broken":    {flip(len(base) + 2), "record:"},
		"magic broken":     {flip(len(good) - 1), "no trailer"},
	}
	for name, c := range cases {
		_, err := ReadProvenance(c.data)
		if !errors.Is(err, ErrProvenance) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: expected ErrProvenance with %q, got %v", name, c.want, err)
		}
	}
}

// TestArtifactRuns: an executable with the trailer after it still runs.
func TestArtifactRuns(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to build from")
	}
	base, err := os.ReadFile(prog)
	if err != nil {
		t.Skip(err)
	}
	path := filepath.Join(t.TempDir(), "sensor")
	if err := os.WriteFile(path, Assemble(base, request("sensor", "r1"), []byte("v1")), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(path).CombinedOutput(); err != nil {
		t.Fatalf("expected the artifact to run as the program does, got %v: %s", err, out)
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", maxReason)
	got := clip(long)
	if len(got) > maxReason+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Fatalf("expected %d bytes at most, cut on a character, got %d", maxReason, len(got))
	}
	if clip("short") != "short" {
		t.Fatal("expected a short reason kept whole")
	}
}
