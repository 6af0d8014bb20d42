package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestEchoServesItsTool runs the module against the real server with the
// composed grants and calls its tool as the module that uses it.
func TestEchoServesItsTool(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "conformance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	dir := t.TempDir()
	write := func(user string) string {
		p := filepath.Join(dir, user+".json")
		if err := os.WriteFile(p, s.Creds[user].Marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv(wire.EnvCredential, write(wire.ModuleUser("node-a", "server")))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("echo: %v", err)
		}
	}()

	callCtx, callCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer callCancel()
	caller, err := sdk.Connect(callCtx, write(wire.ModuleUser("node-b", "caller")))
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	// The module may still be starting: no responders until it serves.
	for {
		got, err := caller.Request(callCtx, "server", tool, []byte(`{"n":1}`))
		if err == nil {
			if string(got) != `{"n":1}` {
				t.Fatalf("expected the arguments echoed, got %s", got)
			}
			return
		}
		select {
		case <-callCtx.Done():
			t.Fatalf("echo never answered: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
