package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Sentinel errors of the server's own check.
var (
	// ErrServerRefused means nats-server itself refuses the configuration.
	ErrServerRefused = errors.New("nats-server refuses the configuration")
	// ErrNeedsRestart means the configuration is valid but changes what a
	// running server cannot reload (a listen address, server_name, the
	// JetStream store): nats-server would reject the whole reload.
	ErrNeedsRestart = errors.New("nats-server cannot reload to the configuration without a restart")
)

// checkTimeout bounds one run of the server's check; it parses a file and
// loads the TLS files it names, well under a second.
const checkTimeout = 30 * time.Second

// serverCheck asks the nats-server binary itself whether it accepts the
// configuration file candidate (`nats-server -c candidate -t`) and, when
// running is not empty, whether a server started on running can reload to
// candidate (`-c running -t --test_reload candidate`, exit status 3 when a
// restart would be needed). Asking the very binary that will load the file
// is exact where a copy of its parser linked into the entrypoint would not
// be: the same version, the same validation the server does at start, the
// same reload rules. It costs one short process per change.
//
// An error wrapping neither sentinel means the check could not be run.
func serverCheck(ctx context.Context, server, candidate, running string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	args := []string{"-c", candidate, "-t"}
	if running != "" {
		args = []string{"-c", running, "-t", "--test_reload", candidate}
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, server, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("check configuration with %s: %w", server, ctx.Err())
	case errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == 3 && running != "":
		return fmt.Errorf("%w: %s", ErrNeedsRestart, said(out.Bytes()))
	case errors.As(err, &ee) && ee.Exited():
		return fmt.Errorf("%w (exit status %d): %s", ErrServerRefused, ee.ExitCode(), said(out.Bytes()))
	default:
		return fmt.Errorf("check configuration with %s: %w", server, err)
	}
}

// said is the server's own words, on one line and of bounded length.
func said(out []byte) string {
	s := strings.Join(strings.Fields(string(out)), " ")
	if s == "" {
		return "(it said nothing)"
	}
	const limit = 600
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}
