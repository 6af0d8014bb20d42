// Command traffic is the cutover bed's traffic: a module that emits
// sequence-numbered events and serves a tool (as "ticker"), and one that
// consumes those events and calls that tool (as "tally"), throughout,
// keeping a ledger of everything in its working directory
// (stand-ins/traffic/ledger) for the bed to read from outside. Which it
// plays is the module its credential was issued for. It is written
// against the SDK alone, so it runs on whichever bus its credential
// names, and a host that moves to another bus starts it again there: the
// ledger is how it goes on where it stopped.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/stand-ins/traffic/ledger"
)

// How often the ticker emits and the tally calls, and how long a call
// waits for its answer.
const (
	emitEvery = 50 * time.Millisecond
	callEvery = 100 * time.Millisecond
	callWait  = 2 * time.Second
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, "", "."); err != nil {
		log.Error("traffic stopped", "err", err)
		os.Exit(1)
	}
}

// run plays the module credential names (empty: $MESH_CREDENTIAL, as a
// host runs it) until ctx ends, its ledger in dir (the working directory,
// as a host runs it; tests run both modules in one process).
func run(ctx context.Context, log *slog.Logger, credential, dir string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := sdk.Connect(cctx, credential, sdk.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer m.Close()
	log.Info("connected", "module", m.Name(), "node", m.Node())
	switch m.Name() {
	case ledger.Ticker:
		return tick(ctx, m, dir)
	case ledger.Tally:
		return tally(ctx, m, dir)
	default:
		return fmt.Errorf("traffic plays %s or %s, not %s", ledger.Ticker, ledger.Tally, m.Name())
	}
}

// tick serves the tool and emits an event every emitEvery, the next
// sequence number after the last its ledger holds, each until the bus
// confirms it (every attempt with the same event id).
func tick(ctx context.Context, m *sdk.Module, dir string) error {
	emitted := filepath.Join(dir, ledger.EmittedFile)
	if err := m.Handle(ledger.Tool, func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
		return fmt.Errorf("serve %s: %w", ledger.Tool, err)
	}
	seq, err := ledger.LastSeq(emitted)
	if err != nil {
		return err
	}
	t := time.NewTicker(emitEvery)
	defer t.Stop()
	for seq++; ; seq++ {
		body, err := json.Marshal(ledger.Tick{Seq: seq})
		if err != nil {
			return err
		}
		for {
			if ctx.Err() != nil {
				return nil
			}
			if _, err = m.Publish(ctx, ledger.EventKey, body, sdk.WithEventID(ledger.EventID(seq))); err == nil {
				break
			}
			<-t.C // not confirmed: the same event again, at the next tick
		}
		if err := ledger.Append(emitted, ledger.EntryLine(seq, time.Now())); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tally records every delivery of the ticker's event before it is acked
// (a redelivery is recorded again), and calls the ticker's tool every
// callEvery, recording each call when it ends.
func tally(ctx context.Context, m *sdk.Module, dir string) error {
	received, calls := filepath.Join(dir, ledger.ReceivedFile), filepath.Join(dir, ledger.CallsFile)
	err := m.Subscribe(ledger.Ticker+"."+ledger.EventKey, func(_ context.Context, e sdk.Event) error {
		var t ledger.Tick
		if err := json.Unmarshal(e.Body, &t); err != nil || t.Seq == 0 {
			return fmt.Errorf("event %s is not a tick: %s", e.ID, e.Body)
		}
		return ledger.Append(received, ledger.EntryLine(t.Seq, time.Now()))
	})
	if err != nil {
		return err
	}
	t := time.NewTicker(callEvery)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, callWait)
		_, err := m.Request(cctx, ledger.Ticker, ledger.Tool, fmt.Appendf(nil, `{"n":%d}`, n))
		cancel()
		if ctx.Err() != nil {
			return nil // stopped mid-call: not a failure of the bus
		}
		if err := ledger.Append(calls, ledger.CallLine(time.Now(), err)); err != nil {
			return err
		}
	}
}
