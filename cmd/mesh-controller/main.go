// Command mesh-controller is the mesh's controller: genesis raises a
// mesh's state from nothing, apply recomposes it after the description
// changed, and run asserts the bus's streams and consumers and stays up.
//
//	mesh-controller genesis --mesh FILE --state DIR [--bcrypt-cost N]
//	mesh-controller apply   --mesh FILE --state DIR [--bcrypt-cost N]
//	mesh-controller run     --mesh FILE --state DIR
//
// Logs are JSON lines on stderr; genesis and apply print a JSON summary on
// stdout. Exit status: 0 done, 1 refused or failed, 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	usageLine  = "usage: mesh-controller genesis|apply|run --mesh FILE --state DIR [--bcrypt-cost N]"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program but for the process: testable in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	cmd := args[0]
	fs := flag.NewFlagSet("mesh-controller "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	meshFile := fs.String("mesh", "", "the mesh description (YAML)")
	stateDir := fs.String("state", "", "the state directory")
	cost := bcrypt.DefaultCost
	if cmd == "genesis" || cmd == "apply" {
		fs.IntVar(&cost, "bcrypt-cost", bcrypt.DefaultCost, "bcrypt cost of the password hashes")
	}
	switch cmd {
	case "genesis", "apply", "run":
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", cmd, usageLine)
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if *meshFile == "" || *stateDir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mesh-controller %s: --mesh and --state are required, nothing else\n%s\n", cmd, usageLine)
		return exitUsage
	}
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		fmt.Fprintf(stderr, "mesh-controller %s: --bcrypt-cost %d is outside %d..%d\n", cmd, cost, bcrypt.MinCost, bcrypt.MaxCost)
		return exitUsage
	}
	log = log.With("cmd", cmd)

	err := func() error {
		m, err := meshdesc.Load(*meshFile)
		if err != nil {
			return err
		}
		opts := controller.Options{BcryptCost: cost, Logger: log}
		switch cmd {
		case "genesis":
			res, err := controller.Genesis(m, *stateDir, opts)
			if err != nil {
				return err
			}
			return printJSON(stdout, res)
		case "apply":
			res, err := controller.Apply(m, *stateDir, opts)
			if err != nil {
				return err
			}
			return printJSON(stdout, res)
		default:
			return controller.Run(ctx, m, *stateDir, controller.RunOptions{Logger: log})
		}
	}()
	if err != nil {
		log.Error("failed", "err", err, "drift", errors.Is(err, controller.ErrDrift))
		// The plain text as well: a refused description lists its entries
		// one per line, which a JSON string makes unreadable.
		fmt.Fprintf(stderr, "mesh-controller %s: %v\n", cmd, err)
		return exitFailed
	}
	return exitOK
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
