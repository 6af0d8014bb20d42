package images

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func digest(t *testing.T, in Inputs, root string) string {
	t.Helper()
	d, err := in.Digest(root)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDigest(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"go.mod": "module x\n", "a/a.go": "package a\n", "b/b.go": "package b\n"})
	base := Inputs{GoVersion: "go1.26.8", Platform: "linux/amd64", Spec: Probe(), Files: []string{"go.mod", "a/a.go", "b/b.go"}}
	want := digest(t, base, root)

	same := base
	same.Files = []string{"b/b.go", "go.mod", "a/a.go", "a/a.go"}
	if got := digest(t, same, root); got != want {
		t.Errorf("file order or repetition changed the digest")
	}

	for name, change := range map[string]func(in *Inputs){
		"go version":   func(in *Inputs) { in.GoVersion = "go1.26.9" },
		"platform":     func(in *Inputs) { in.Platform = "linux/arm64" },
		"spec command": func(in *Inputs) { in.Spec.Cmd = []string{"--x"} },
		"spec name":    func(in *Inputs) { in.Spec.Name = "other" },
		"fewer files":  func(in *Inputs) { in.Files = in.Files[:2] },
	} {
		in := base
		in.Spec.Cmd = slices.Clone(base.Spec.Cmd)
		change(&in)
		if got := digest(t, in, root); got == want {
			t.Errorf("%s: expected the digest to change", name)
		}
	}

	// Content moved between files is a different input set.
	writeFiles(t, root, map[string]string{"a/a.go": "package a\n\n"})
	changed := digest(t, base, root)
	if changed == want {
		t.Errorf("file content: expected the digest to change")
	}
	writeFiles(t, root, map[string]string{"a/a.go": "package a\n"})
	if got := digest(t, base, root); got != want {
		t.Errorf("restoring the content: expected the original digest back")
	}

	missing := base
	missing.Files = append(slices.Clone(base.Files), "c/c.go")
	if _, err := missing.Digest(root); err == nil {
		t.Errorf("expected an error for a missing input file")
	}
}

// TestInputsFollowModuleDependencies runs go list on a throwaway module:
// what a binary imports (and embeds) from our module counts, test files and
// packages it does not import do not.
func TestInputsFollowModuleDependencies(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.26\n",
		"cmd/x/main.go":    "package main\n\nimport \"example.com/m/lib\"\n\nfunc main() { lib.Hello() }\n",
		"lib/lib.go":       "package lib\n\nimport _ \"embed\"\n\n//go:embed hello.txt\nvar hello string\n\n// Hello prints.\nfunc Hello() { println(hello) }\n",
		"lib/hello.txt":    "hello\n",
		"lib/lib_test.go":  "package lib\n",
		"other/other.go":   "package other\n",
		"lib/README":       "not an input\n",
		"cmd/x/x_linux.go": "package main\n",
	})
	b := &Builder{Root: root}
	spec := Spec{Name: "x", Binaries: []Binary{{Package: "example.com/m/cmd/x", Name: "x"}}, Entrypoint: []string{"/x"}}

	in, err := b.inputs(t.Context(), root, spec)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"cmd/x/main.go", "cmd/x/x_linux.go", "go.mod", "lib/hello.txt", "lib/lib.go"}
	if !slices.Equal(in.Files, wantFiles) {
		t.Fatalf("expected input files %q, got %q", wantFiles, in.Files)
	}
	if !strings.HasPrefix(in.GoVersion, "go1.") {
		t.Fatalf("expected a Go version, got %q", in.GoVersion)
	}

	d0 := mustDigest(t, b, root, spec)
	if d := mustDigest(t, b, root, spec); d != d0 {
		t.Fatalf("expected a stable digest, got %s then %s", d0, d)
	}
	for _, tc := range []struct {
		file    string
		changes bool
	}{
		{"lib/lib_test.go", false},
		{"other/other.go", false},
		{"lib/README", false},
		{"lib/hello.txt", true},
		{"lib/lib.go", true},
	} {
		p := filepath.Join(root, tc.file)
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, root, map[string]string{tc.file: string(orig) + "\n// edited\n"})
		if d := mustDigest(t, b, root, spec); (d != d0) != tc.changes {
			t.Errorf("editing %s: expected digest changed=%v", tc.file, tc.changes)
		}
		writeFiles(t, root, map[string]string{tc.file: string(orig)})
	}
}

func mustDigest(t *testing.T, b *Builder, root string, s Spec) string {
	t.Helper()
	d, err := b.digest(t.Context(), root, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRealSpecsInputs checks the shipped specs against this checkout.
func TestRealSpecsInputs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b := &Builder{Root: root}
	for _, tc := range []struct {
		spec Spec
		want []string
	}{
		{NATS(), []string{"go.mod", "go.sum", "cmd/mesh-nats/main.go", "cmd/mesh-nats/internal/watch/watch.go", "cmd/mesh-nats/internal/confcheck/confcheck.go"}},
		{Probe(), []string{"go.mod", "go.sum", "stand-ins/probe/main.go", "stand-ins/probe/probe.go"}},
	} {
		in, err := b.inputs(t.Context(), root, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tc.want {
			if !slices.Contains(in.Files, f) {
				t.Errorf("%s: expected %s among the inputs %q", tc.spec.Name, f, in.Files)
			}
		}
		for _, f := range in.Files {
			if strings.HasSuffix(f, "_test.go") {
				t.Errorf("%s: test file %s among the inputs", tc.spec.Name, f)
			}
		}
		if a, b := mustDigest(t, b, root, tc.spec), mustDigest(t, b, root, tc.spec); a != b {
			t.Errorf("%s: digest not stable: %s then %s", tc.spec.Name, a, b)
		}
	}
}

func TestMissingPackageIsInfrastructure(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b := &Builder{Root: root}
	spec := Spec{Name: "mesh-none", Binaries: []Binary{{Package: module + "/cmd/no-such-command", Name: "x"}}}
	_, err = b.Ensure(t.Context(), spec)
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("expected ErrInfrastructure, got %v", err)
	}
}

func TestSpecCheck(t *testing.T) {
	for _, s := range All() {
		if err := s.check(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	bin := []Binary{{Package: "p", Name: "x"}}
	for name, s := range map[string]Spec{
		"upper case":  {Name: "Mesh", Binaries: bin},
		"tag in name": {Name: "mesh:1", Binaries: bin},
		"no binaries": {Name: "mesh"},
		"twice":       {Name: "mesh", Binaries: append(bin, bin...)},
		"absolute":    {Name: "mesh", Binaries: []Binary{{Package: "p", Name: "/a/b"}}},
		"unclean":     {Name: "mesh", Binaries: []Binary{{Package: "p", Name: "a/../../b"}}},
		"out of it":   {Name: "mesh", Binaries: []Binary{{Package: "p", Name: "../b"}}},
		"dockerfile":  {Name: "mesh", Binaries: []Binary{{Package: "p", Name: "Dockerfile"}}},
	} {
		if err := s.check(); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
	if err := (Spec{Name: "mesh", Binaries: []Binary{{Package: "p", Name: "toolchain/sensor"}}}).check(); err != nil {
		t.Errorf("a binary in a directory of the image: %v", err)
	}
}
