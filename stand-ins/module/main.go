// Command module is the beds' stand-in for a module a host runs whose own
// program is not installed (installation is the next issue's): it
// connects with the credential the host gave it ($MESH_CREDENTIAL), as
// the module it was started for, says so, and stays connected until it is
// told to stop. A host runs it for every module (host.DefaultProgram), so
// a bed can see each declared module as its own process, connected to the
// bus as its own user.
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

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("stand-in module stopped", "err", err)
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
	log.Info("connected", "module", m.Name(), "node", m.Node())
	<-ctx.Done()
	return nil
}
