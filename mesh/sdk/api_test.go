package sdk_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/doc"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/api.golden from the package's exported surface")

// TestExportedSurface holds the SDK to its recorded surface (ADR 0039: the
// contract and nothing more). A name added, removed or changed shows in
// testdata/api.golden's diff, so a helper arriving with a transport is
// seen in review. Run with -update to accept a change.
func TestExportedSurface(t *testing.T) {
	got := surface(t, ".")
	golden := filepath.Join("testdata", "api.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read %s (run go test -run TestExportedSurface -update to create it): %v", golden, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the exported surface changed; review it and run go test -run TestExportedSurface -update\n--- want\n%s\n--- got\n%s", want, got)
	}
}

// surface lists the package's exported declarations without comments or
// bodies, in go/doc's order: constants, variables, functions, then each
// type with its constructors and methods.
func surface(t *testing.T, dir string) []byte {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/meshbus/mesh/mesh/sdk")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString("package " + pkg.Name + "\n")
	emit := func(node any) {
		var b bytes.Buffer
		cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
		if err := cfg.Fprint(&b, fset, node); err != nil {
			t.Fatal(err)
		}
		// The blank lines left where doc comments were say nothing here.
		out.WriteString("\n")
		for line := range strings.Lines(b.String()) {
			if strings.TrimSpace(line) != "" {
				out.WriteString(line)
			}
		}
		out.WriteString("\n")
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			emit(v.Decl)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			f.Decl.Body = nil
			emit(f.Decl)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs(pkg.Funcs)
	for _, typ := range pkg.Types {
		emit(typ.Decl)
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs)
		funcs(typ.Methods)
	}
	// Realign what dropping the blank lines misaligned.
	formatted, err := format.Source(out.Bytes())
	if err != nil {
		t.Fatalf("format the surface: %v\n%s", err, out.Bytes())
	}
	return formatted
}
