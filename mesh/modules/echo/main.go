// Command echo is a sample module written against the SDK's contract and
// nothing else: it serves the tool echo, answering each call with its
// arguments, until it is told to stop. It knows no bus: the credential
// it is given ($MESH_CREDENTIAL) decides whether it runs on AMQP or on
// NATS, which is ADR 0039's test — a module built once serves its tools
// unchanged on the new runtime (design 25 §8, §10 step 3).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
)

// tool is the tool this module serves.
const tool = "echo"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("echo stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := sdk.Connect(cctx, "", sdk.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer m.Close()
	if err := m.Handle(tool, func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
		return fmt.Errorf("serve %s: %w", tool, err)
	}
	log.Info("serving", "module", m.Name(), "node", m.Node(), "tool", tool)
	<-ctx.Done()
	return nil
}
