// Command mesh-nats is the entrypoint of the mesh-nats image (design 25 §5).
//
// It runs nats-server as its child with `-c <config>`, polls that one
// configuration file and sends the child SIGHUP when the file's content
// changes, so that a recomposed configuration (users added or revoked,
// permissions changed) goes live without recreating the container. It
// forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to the child and
// exits with the child's exit status (128+signal if the child was killed).
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
	poll      time.Duration
	childArgs []string // extra arguments for nats-server, after -c <config>
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and supervises the child, returning the exit status.
func run(args []string, stdout, stderr io.Writer) int {
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
		"nats-server configuration `file`, passed to the server as -c and polled for changes")
	fs.StringVar(&o.server, "server", "/nats-server", "nats-server `binary` to run as the child")
	fs.DurationVar(&o.poll, "poll", time.Second,
		"how often to poll the configuration file; a content change sends the server SIGHUP")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: mesh-nats [flags] [-- extra nats-server args]

Runs nats-server as a child with -c <config>, reloads it with SIGHUP when the
configuration file's content changes, forwards SIGTERM/SIGINT/SIGHUP/SIGUSR1/
SIGUSR2 to it, and exits with its exit status.

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
