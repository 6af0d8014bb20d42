// Command mesh-nats is the entrypoint of the mesh-nats image (design 25 §5).
//
// It polls one configuration file and runs nats-server as its child on a
// checked copy of it, which it replaces and answers with SIGHUP when the
// file's content changes, so that a recomposed configuration (users added
// or revoked, permissions changed) goes live without recreating the
// container. A content is applied only when it is whole and keeps the bus
// closed (internal/confcheck) and nats-server itself accepts it and can
// reload to it (`-t --test_reload`); otherwise the server keeps the last
// good one and a log line says why. A bad file at start means no server:
// mesh-nats exits 1. It forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and
// SIGUSR2 to the child and exits with the child's exit status (128+signal
// if the child was killed): a server killed with SIGKILL stops the
// container, which a start brings back on the same store. `mesh-nats
// signal NAME` (run in the container, docker exec) signals the server
// itself, through the pid file the entrypoint keeps in its run directory.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// options are the command line of mesh-nats.
type options struct {
	config    string
	server    string
	runDir    string
	poll      time.Duration
	childArgs []string // extra arguments for nats-server, after -c <config>
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and supervises the child, returning the exit status;
// `mesh-nats signal …` signals the running child instead (runSignal).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "signal" {
		return runSignal(args[1:], stdout, stderr)
	}
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("prog", "mesh-nats")
	return supervise(opts, stdout, stderr, log)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mesh-nats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "/etc/nats/nats.conf",
		"nats-server configuration `file` to watch; the server runs on a checked copy of it")
	fs.StringVar(&o.server, "server", "/nats-server", "nats-server `binary` to run as the child")
	fs.StringVar(&o.runDir, "run-dir", "/run/mesh-nats",
		"`directory` for the checked copy the server loads (its -c) and the candidate being checked")
	fs.DurationVar(&o.poll, "poll", time.Second,
		"how often to poll the configuration file; a content change sends the server SIGHUP")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: mesh-nats [flags] [-- extra nats-server args]

Runs nats-server as a child on a checked copy of the configuration file and
reloads it with SIGHUP when the file's content changes, but only to a
configuration that is whole (one JSON document), has users with passwords in
every account, and nats-server itself accepts; otherwise it keeps the last
good one and logs why. Exits 1 if the file is not good at start. Forwards
SIGTERM/SIGINT/SIGHUP/SIGUSR1/SIGUSR2 to the server and exits with its status.

       mesh-nats signal [--run-dir D] KILL|TERM|INT|HUP|STOP|CONT|USR1|USR2
sends the signal to the running server itself (its pid is in D/server.pid).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.poll <= 0 {
		fmt.Fprintf(stderr, "mesh-nats: --poll must be positive, got %v\n", o.poll)
		return o, fmt.Errorf("parse flags: --poll %v is not positive", o.poll)
	}
	o.childArgs = fs.Args()
	return o, nil
}
