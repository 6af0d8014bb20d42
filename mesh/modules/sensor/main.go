// Command sensor is a sample module written against the SDK's contract
// and nothing else: it serves the tool calibrate (package calibrate),
// keeping the offset in memory, until it is told to stop. With the relay
// it is how a bed shows a module's tool invoked from another node by an
// account that may invoke it, and refused by the server to one that may
// not (design 25 §10, step 4).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/modules/sensor/calibrate"
	"github.com/meshbus/mesh/mesh/sdk"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, ""); err != nil {
		log.Error("sensor stopped", "err", err)
		os.Exit(1)
	}
}

// run serves calibrate until ctx ends. credential is the credential
// file's path; empty, as a host runs the module, it is the one
// $MESH_CREDENTIAL names (sdk.Connect's rule). Tests name it instead,
// so that one process can run several modules at once.
func run(ctx context.Context, log *slog.Logger, credential string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := sdk.Connect(cctx, credential, sdk.WithLogger(log))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	var s calibrate.Sensor
	handler := func(ctx context.Context, args []byte) ([]byte, error) {
		out, err := s.Calibrate(ctx, args)
		if err == nil {
			log.Info("calibrated", "answer", string(out))
		}
		return out, err
	}
	if err := m.Handle(calibrate.Tool, handler); err != nil {
		_ = m.Close()
		return fmt.Errorf("serve %s: %w", calibrate.Tool, err)
	}
	log.Info("serving", "module", m.Name(), "node", m.Node(), "tool", calibrate.Tool)
	<-ctx.Done()
	if err := m.Close(); err != nil {
		return fmt.Errorf("stop serving: %w", err)
	}
	return nil
}
