package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-h"}, 0, "mesh-nats, mesh-controller, mesh-host, mesh-builder, mesh-source, mesh-predecessor, mesh-probe"},
		{[]string{"--help"}, 0, "Usage: build-images"},
		// A driver of the registry not written in Go, by its image's name.
		{[]string{"-h"}, 0, "mesh-driver-js"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"mesh-nope"}, 2, `unknown image "mesh-nope"`},
	} {
		var out bytes.Buffer
		if code := run(t.Context(), tc.args, &out, &out); code != tc.code {
			t.Errorf("%q: expected exit %d, got %d", tc.args, tc.code, code)
		}
		if !strings.Contains(out.String(), tc.says) {
			t.Errorf("%q: expected output to mention %q, got:\n%s", tc.args, tc.says, out.String())
		}
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "build-images", "main.go")); err != nil {
		t.Fatalf("expected the module root holding cmd/build-images, got %q: %v", root, err)
	}
}
