package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/stand-ins/traffic/ledger"
)

// TestTheTrafficGoesOnWhereItStoppedAcrossARestart runs the ticker and
// the tally as a host does, against the real server with the cutover
// mesh's grants, stops the ticker and starts it again from the same
// working directory (what a host does to a module when its bus changes),
// and reads the ledgers as the bed does: the sequence goes on unbroken,
// every event confirmed is received, and the calls are answered.
func TestTheTrafficGoesOnWhereItStoppedAcrossARestart(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "cutover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	assertStreams(ctx, t, s, m)

	creds := t.TempDir()
	credFile := func(node, module string) string {
		p := filepath.Join(creds, module+".json")
		if err := os.WriteFile(p, s.Creds[wire.ModuleUser(node, module)].Marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tickerDir, tallyDir := t.TempDir(), t.TempDir()
	tally := start(t, credFile("node-b", ledger.Tally), tallyDir)
	defer tally.stop(t)

	ticker := start(t, credFile("node-a", ledger.Ticker), tickerDir)
	waitFor(ctx, t, "the ticker's first events received and calls answered", func() bool {
		tr := read(t, tickerDir, tallyDir)
		return tr.Emitted >= 10 && tr.Received == tr.Emitted && tr.Calls-tr.Failed >= 5
	})
	ticker.stop(t)
	before := read(t, tickerDir, tallyDir).Emitted

	ticker = start(t, credFile("node-a", ledger.Ticker), tickerDir)
	waitFor(ctx, t, "the ticker started again to emit", func() bool { return read(t, tickerDir, tallyDir).Emitted >= before+10 })
	ticker.stop(t)

	var tr ledger.Traffic
	waitFor(ctx, t, "every event emitted received", func() bool {
		tr = read(t, tickerDir, tallyDir)
		return len(tr.Missing) == 0
	})
	emitted, err := ledger.ReadEntries(mustRead(t, filepath.Join(tickerDir, ledger.EmittedFile)))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range emitted {
		if e.Seq != uint64(i+1) {
			t.Fatalf("expected the ticker's sequence unbroken across its restart, line %d is %d", i+1, e.Seq)
		}
	}
	if tr.Emitted <= before || tr.Received != tr.Emitted {
		t.Fatalf("expected the events of both runs received, %d emitted (%d before the restart), %d received", tr.Emitted, before, tr.Received)
	}
	if tr.Calls == tr.Failed || tr.Answered.IsZero() {
		t.Fatalf("expected calls answered, %d of %d failed (the last: %s)", tr.Failed, tr.Calls, tr.Why)
	}
}

func assertStreams(ctx context.Context, t *testing.T, s *natstest.Server, m *meshdesc.Mesh) {
	t.Helper()
	jss := natsplane.JetStreams{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		nc, err := s.Dial(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if jss[s.Creds[user].Account()], err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := natsplane.Assert(ctx, jss, natsplane.DesiredState(m, natsplane.DefaultPolicy()), nil); err != nil {
		t.Fatalf("assert streams and consumers: %v", err)
	}
}

// running is one module's run of the program.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, credential, dir string) running {
	ctx, cancel := context.WithCancel(context.Background())
	r := running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), credential, dir) }()
	return r
}

func (r running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("traffic: %v", err)
	}
}

func read(t *testing.T, tickerDir, tallyDir string) ledger.Traffic {
	t.Helper()
	emitted, err := ledger.ReadEntries(mustRead(t, filepath.Join(tickerDir, ledger.EmittedFile)))
	if err != nil {
		t.Fatal(err)
	}
	received, err := ledger.ReadEntries(mustRead(t, filepath.Join(tallyDir, ledger.ReceivedFile)))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := ledger.ReadCalls(mustRead(t, filepath.Join(tallyDir, ledger.CallsFile)))
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Summarize(emitted, received, calls)
}

// mustRead is the file at path, empty while it does not exist.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return data
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("expected %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
