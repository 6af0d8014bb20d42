package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/meshbus/mesh/mesh/build"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// dialTimeout bounds the first connection to the bus, dialAttempt each
// attempt at it.
const (
	dialTimeout = 30 * time.Second
	dialAttempt = 10 * time.Second
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, parse := flags("serve")
	credFile := fs.String("credential", "", "the builder's credential `file`")
	toolchain := fs.String("toolchain", "", "the `directory` holding each module's program")
	name := fs.String("name", "", "the builder's `name` in outcomes (default the host name)")
	if code, ok := parse(args, stdout, stderr); !ok {
		return code
	}
	if *credFile == "" || *toolchain == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mesh-build serve: --credential FILE and --toolchain DIR are required and nothing else\n\n%s", usage)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("program", "mesh-build")
	fail := func(err error) int {
		log.Error("mesh-build serve failed", "err", err)
		fmt.Fprintf(stderr, "mesh-build serve: %v\n", err)
		return 1
	}
	if *name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fail(fmt.Errorf("no --name and no host name: %w", err))
		}
		*name = host
	}
	if fi, err := os.Stat(*toolchain); err != nil {
		return fail(fmt.Errorf("toolchain: %w", err))
	} else if !fi.IsDir() {
		return fail(fmt.Errorf("toolchain %s is not a directory", *toolchain))
	}
	cred, err := loadCredential(*credFile)
	if err != nil {
		return fail(err)
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	// The bus by the credential's scheme; the builder outlives a restart
	// of it, and what it reports after the fact is logged. The first
	// connection is tried again until dialTimeout (buses.DialAgain).
	var bus plane.Builder
	err = link.Retry(dctx, log, "connect", dialAttempt, func(ctx context.Context) (bool, error) {
		var err error
		bus, err = buses.DialBuilder(ctx, cred, link.WithName("mesh-build "+*name), link.WithConnectionLog(log))
		return buses.DialAgain(err), err
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return fail(err)
	}
	defer func() { _ = bus.Close() }()
	err = build.Run(ctx, build.Options{Bus: bus, Key: cred.Password(), Toolchain: *toolchain, Name: *name, Log: log})
	if err != nil {
		return fail(err)
	}
	return 0
}

// loadCredential reads the builder's credential.
func loadCredential(path string) (wire.Credential, error) {
	cred, err := wire.ReadCredentialFile(path)
	if err != nil {
		return wire.Credential{}, err
	}
	if cred.Principal != wire.PrincipalBuilder {
		return wire.Credential{}, fmt.Errorf("credential %s: principal %q, want %q (the builder's)", path, cred.Principal, wire.PrincipalBuilder)
	}
	return cred, nil
}
