// Command relay is a sample module written against the SDK's contract and
// nothing else: it serves the tool call, which calls another module's tool
// on the relay's own account and answers what happened (package call),
// until it is told to stop. The same program runs as "relay", whose
// manifest uses the tools a bed tests, and as "stranger", whose manifest
// uses nothing: the server lets the first call and refuses the second
// (design 25 §10, step 4). Whoever may call it acts with its grant, so a
// mesh grants it to its administrators only.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/modules/relay/call"
	"github.com/meshbus/mesh/mesh/sdk"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, ""); err != nil {
		log.Error("relay stopped", "err", err)
		os.Exit(1)
	}
}

// run serves call until ctx ends. credential is the credential file's
// path; empty, as a host runs the module, it is the one $MESH_CREDENTIAL
// names (sdk.Connect's rule). Tests name it instead, so that one process
// can run relay and stranger at once.
func run(ctx context.Context, log *slog.Logger, credential string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := sdk.Connect(cctx, credential, sdk.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := m.Handle(call.Tool, relay(m, log)); err != nil {
		_ = m.Close()
		return fmt.Errorf("serve %s: %w", call.Tool, err)
	}
	log.Info("serving", "module", m.Name(), "node", m.Node(), "tool", call.Tool)
	<-ctx.Done()
	if err := m.Close(); err != nil {
		return fmt.Errorf("stop serving: %w", err)
	}
	return nil
}

// relay is the handler of call: a request it cannot read is its error;
// every call it makes, whatever became of it, is its answer.
func relay(m *sdk.Module, log *slog.Logger) sdk.ToolHandler {
	return func(ctx context.Context, args []byte) ([]byte, error) {
		r, err := call.Parse(args)
		if err != nil {
			return nil, err
		}
		a := call.Make(ctx, r, m.Request)
		log.Info("relayed", "module", r.Module, "tool", r.Tool, "outcome", a.Outcome, "calls", a.Calls, "err", a.Error)
		out, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encode answer: %w", err)
		}
		return out, nil
	}
}
