package controller

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/wire"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		<-tick.C
	}
}

// TestRunWaitsForTheServerThenIsReady starts the controller before the
// server: it retries, asserts once the server is up, logs "ready" and
// returns nil when its context ends.
func TestRunWaitsForTheServerThenIsReady(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	var logs testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, b.m, b.st, RunOptions{StartTimeout: 30 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	eventually(t, 10*time.Second, "a failed attempt logged", func() bool { return strings.Contains(logs.String(), "retrying") })
	if strings.Contains(logs.String(), `"msg":"ready"`) {
		t.Fatal("ready before the server exists")
	}
	b.start()
	eventually(t, 20*time.Second, `"msg":"ready" logged`, func() bool { return strings.Contains(logs.String(), `"msg":"ready"`) })
	if _, err := b.js().Stream(ctxT(t), wire.StreamEvents); err != nil {
		t.Fatalf("ready without EVENTS: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("expected nil after the context ended, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

// TestStartRefusesDriftAtOnce: waiting cannot fix a drift, so Start does
// not retry it until its deadline.
func TestStartRefusesDriftAtOnce(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	b.start()
	if _, err := b.js().CreateStream(ctxT(t), jetstream.StreamConfig{Name: wire.StreamBuilds, Subjects: []string{wire.SubjectBuildAll}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, _, err := Start(context.Background(), b.m, b.st, RunOptions{StartTimeout: 30 * time.Second})
	if !errors.Is(err, ErrDrift) || !strings.Contains(err.Error(), "stream BUILDS: retention: expected WorkQueue, got Limits") {
		t.Fatalf("expected ErrDrift naming BUILDS's storage, got %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("drift refused after %v; expected at once", took)
	}
}
