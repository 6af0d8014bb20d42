package main

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/cmd/mesh-nats/internal/confcheck"
	"github.com/meshbus/mesh/cmd/mesh-nats/internal/watch"
	"github.com/meshbus/mesh/mesh/pki"
)

func goldenConfig(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "mesh", "compose", "testdata", "sample.nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTornPrefixSweep writes every prefix of the composed configuration
// in place, one poll each, into the watcher and applier the entrypoint
// runs, and counts the reloads: the goal is one, for the whole document.
// (Before issue 7 §2 the entrypoint reloaded on every one of them.) The
// server's check is the fake one; TestServerCheck asks the real server.
func TestTornPrefixSweep(t *testing.T) {
	t.Setenv(envChild, "check") // the check runs this binary as the fake server
	golden := goldenConfig(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf(4222, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix, reloads, at := 0, 0, -1
	a := newApplier(options{config: path, server: os.Args[0], runDir: filepath.Join(dir, "run")},
		func() error { reloads++; at = prefix; return nil }, slog.New(slog.DiscardHandler))
	w, err := watch.New(watch.Options{Path: path, Interval: time.Second, Notify: a.change})
	if err != nil {
		t.Fatal(err)
	}
	content, err := w.Prime()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.start(t.Context(), content); err != nil {
		t.Fatal(err)
	}
	for prefix = 0; prefix <= len(golden); prefix++ {
		if err := os.WriteFile(path, golden[:prefix], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Poll(); err != nil && !errors.Is(err, watch.ErrRefused) {
			t.Fatalf("prefix of %d bytes: %v", prefix, err)
		}
	}
	t.Logf("torn-prefix sweep: %d of %d prefixes of the composed file applied (the one at %d bytes of %d)",
		reloads, len(golden)+1, at, len(golden))
	// The golden file ends in a newline; the document is whole one byte
	// before it, and the newline that follows changes nothing to reload.
	if reloads != 1 || at < len(strings.TrimRight(string(golden), " \n")) {
		t.Fatalf("expected exactly one reload, for the whole document, got %d (the last at %d bytes of %d)", reloads, at, len(golden))
	}
	applied, err := os.ReadFile(a.applied())
	if err != nil {
		t.Fatal(err)
	}
	if !sameDocument(applied, golden) {
		t.Fatalf("expected the server's copy to be the whole composed file, got %d bytes", len(applied))
	}
}

// TestServerCheck asks the nats-server binary built from the version
// pinned in go.mod, the one the image ships, for its verdicts: the exit
// statuses serverCheck reads, and what it makes of the torn file that
// opened the bus in issue 7.
func TestServerCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nats-server from the pinned module (tens of seconds cold); not in -short")
	}
	server := filepath.Join(t.TempDir(), "nats-server")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", server, "github.com/nats-io/nats-server/v2")
	// The image's flags, so the build cache the images filled serves it.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}

	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"nats"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for p, b := range map[string][]byte{cert: certPEM, key: keyPEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	local := strings.NewReplacer("/etc/nats/server-cert.pem", cert, "/etc/nats/server-key.pem", key,
		`"store_dir": "/data"`, `"store_dir": "`+filepath.Join(dir, "js")+`"`)
	golden := local.Replace(string(goldenConfig(t)))
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	running := file("running.conf", golden)

	if err := serverCheck(t.Context(), server, running, ""); err != nil {
		t.Fatalf("expected the server to accept the composed configuration, got %v", err)
	}
	if err := serverCheck(t.Context(), server, file("same.conf", golden), running); err != nil {
		t.Fatalf("expected the server to reload to the same configuration, got %v", err)
	}
	moved := file("moved.conf", strings.Replace(golden, "0.0.0.0:4222", "0.0.0.0:4223", 1))
	if err := serverCheck(t.Context(), server, moved, running); !errors.Is(err, ErrNeedsRestart) {
		t.Fatalf("expected a new listen address to need a restart, got %v", err)
	}
	nocert := file("nocert.conf", strings.Replace(golden, cert, filepath.Join(dir, "missing.pem"), 1))
	if err := serverCheck(t.Context(), server, nocert, running); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("expected a missing certificate refused, got %v", err)
	}
	if err := serverCheck(t.Context(), server, nocert, ""); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("expected a missing certificate refused at start, got %v", err)
	}
	if err := serverCheck(t.Context(), filepath.Join(dir, "no-such-server"), running, ""); err == nil || refusal(err) {
		t.Fatalf("expected a missing binary to be a failure to check, not a verdict, got %v", err)
	}

	// The file cut right after the jetstream block: no accounts, no users.
	torn := golden[:strings.Index(golden, `"accounts"`)]
	verdict := serverCheck(t.Context(), server, file("torn.conf", torn), running)
	t.Logf("nats-server's own verdict on the file cut after the jetstream block: %v", verdict)
	if err := confcheck.Check([]byte(torn)); !errors.Is(err, confcheck.ErrNotWhole) {
		t.Fatalf("expected the torn file refused as not whole, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "js")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expected the check to leave the JetStream store alone, got %v", err)
	}
}
