package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/wire"
)

var program = []byte("\x7fELF the toolchain's sensor program")

func TestServeUsage(t *testing.T) {
	dir := t.TempDir()
	toolchain := buildtest.Toolchain(t, program, "sensor")
	// A credential of another principal, and one that is no credential.
	other := wire.Credential{URL: "tls://source.modules:pw@127.0.0.1:4222", Fingerprint: strings.Repeat("a", 64), Principal: wire.PrincipalSource, Name: "modules"}
	otherFile := filepath.Join(dir, "source.json")
	if err := os.WriteFile(otherFile, other.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.json")
	if err := os.WriteFile(junk, []byte(`{"url": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	builder := wire.Credential{URL: "tls://builder:pw@127.0.0.1:4222", Fingerprint: strings.Repeat("a", 64), Principal: wire.PrincipalBuilder}
	builderFile := filepath.Join(dir, "builder.json")
	if err := os.WriteFile(builderFile, builder.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve"}, 2, "--credential FILE and --toolchain DIR are required"},
		{[]string{"serve", "--credential", builderFile}, 2, "--credential FILE and --toolchain DIR are required"},
		{[]string{"serve", "--credential", builderFile, "--toolchain", toolchain, "extra"}, 2, "and nothing else"},
		{[]string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"serve", "--help"}, 0, "Flags of serve:"},
		{[]string{"serve", "-h"}, 0, "-toolchain directory"},
		{[]string{"help"}, 0, "mesh-build serve --credential FILE --toolchain DIR [--name NAME]"},
		{[]string{"serve", "--credential", filepath.Join(dir, "absent.json"), "--toolchain", toolchain}, 1, "credential: open"},
		{[]string{"serve", "--credential", junk, "--toolchain", toolchain}, 1, "invalid credential"},
		{[]string{"serve", "--credential", otherFile, "--toolchain", toolchain}, 1, `principal "source", want "builder"`},
		{[]string{"serve", "--credential", builderFile, "--toolchain", filepath.Join(dir, "absent")}, 1, "toolchain: stat"},
		{[]string{"serve", "--credential", builderFile, "--toolchain", builderFile}, 1, "is not a directory"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.want) {
			t.Errorf("mesh-build %v: expected exit %d with %q, got %d:\n%s%s", c.args, c.code, c.want, code, out.String(), errOut.String())
		}
	}
}

// TestServeInProcess runs serve against the bed until it is told to stop,
// which is exit 0.
func TestServeInProcess(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 0)
	cred := bed.CredentialFile(t.TempDir(), buildtest.Builder)
	toolchain := buildtest.Toolchain(t, program, "sensor")

	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stderr testutil.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(sctx, []string{"serve", "--credential", cred, "--toolchain", toolchain, "--name", "in-process"}, &bytes.Buffer{}, &stderr)
	}()
	if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
		t.Fatal(err)
	}
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	if out.Outcome != wire.BuildSucceeded || out.Builder != "in-process" {
		t.Fatalf("expected the build done by in-process, got %+v\n%s", out, stderr.String())
	}
	stop()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("expected exit 0 when told to stop, got %d:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("expected serve to return within 10s of being told to stop")
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("expected every line on stderr to be JSON, got %q", line)
		}
	}
}
