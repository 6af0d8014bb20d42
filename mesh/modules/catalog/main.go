// Command catalog is the mesh's catalogue (design 25 §7): a sample module
// written against the SDK's contract and mesh/wire's catalogue types
// alone, which claims the seat mesh-catalog and serves
// catalog_tools, answering with every tool the manifests declare — its
// name, description and the JSON Schema of its arguments — so that a
// person's client (cmd/mesh) lists the tools by asking it.
//
// What it lists is its configuration: the wire.Catalogue document the
// controller derived from the description, in the file $MESH_CONFIG names,
// which the host writes from the module's declaration (and, when it
// changes, starts the module again). A missing or invalid configuration
// ends it with exit status 1 before it connects, saying what was wrong.
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
	"github.com/meshbus/mesh/mesh/wire"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("catalog stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	answer, cat, err := loadConfig(os.Getenv(wire.EnvConfig))
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := sdk.Connect(cctx, "", sdk.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer m.Close()
	if err := m.Handle(wire.CatalogTool, func(_ context.Context, args []byte) ([]byte, error) {
		if err := checkNoArgs(args); err != nil {
			return nil, err
		}
		return answer, nil
	}); err != nil {
		return fmt.Errorf("serve %s: %w", wire.CatalogTool, err)
	}
	log.Info("serving", "module", m.Name(), "node", m.Node(), "tool", wire.CatalogTool, "tools", len(cat.Tools))
	<-ctx.Done()
	return nil
}
