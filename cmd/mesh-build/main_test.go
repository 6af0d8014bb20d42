package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := filepath.Join("..", "..", "features", "testdata", "mesh.yaml")
	bad := write("cobol.yaml", `
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [store]}]
modules:
  - {name: store, language: cobol, emits: [saved]}
`)
	// The JavaScript SDK claims the floor and events: a module emitting
	// and consuming is built, one serving a tool is refused.
	jsEvents := write("js-events.yaml", `
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [sensor, panel]}]
modules:
  - {name: sensor, language: javascript, emits: [reading]}
  - {name: panel, language: javascript, consumes: [sensor.reading]}
`)
	jsTools := write("js-tools.yaml", `
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [panel]}]
modules:
  - {name: panel, language: javascript, emits: [shown], tools: [show]}
`)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--mesh", good}, 0, "every module can be built"},
		{[]string{"check", "--mesh", bad}, 1, `module "store": capability not implemented by the module's SDK: no SDK for language "cobol"`},
		{[]string{"check", "--mesh", good, "--module", "ghost"}, 1, `no module "ghost"`},
		{[]string{"check", "--mesh", jsEvents}, 0, "every module can be built"},
		{[]string{"check", "--mesh", jsTools}, 1, `module "panel" in javascript: capability not implemented by the module's SDK: the js SDK claims [connection events], the manifest needs tools (tools: 1)`},
		{[]string{"check"}, 2, "--mesh FILE is required"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"help"}, 0, "Usage:"},
		{[]string{"-h"}, 0, "Usage:"},
		{[]string{"--help"}, 0, "Usage:"},
		{[]string{"check", "--help"}, 0, "-module string"},
		{[]string{"check", "-h"}, 0, "Flags of check:"},
		{[]string{"check", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.want) {
			t.Errorf("mesh-build %v: expected exit %d with %q, got %d:\n%s%s", c.args, c.code, c.want, code, out.String(), errOut.String())
		}
	}
}

// TestNoArgumentsIsBadUsage: mesh-build with no arguments is bad usage,
// exit 2 with the usage on stderr and nothing on stdout, as with every
// other CLI of the project (issue 18: it exited 0).
func TestNoArgumentsIsBadUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), nil, &out, &errOut)
	if code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), "Usage:") {
		t.Fatalf("mesh-build with no arguments: expected exit 2 and the usage on stderr, got %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
