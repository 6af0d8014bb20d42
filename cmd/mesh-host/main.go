// Command mesh-host is the mesh's host on a node: it enrols the node with
// a token (once; its state directory keeps the node's own credential and
// sealing key, 0600), connects as the node's host, says it is alive,
// takes its newest declaration from NODES, fetches its modules'
// credentials, installs the artifacts the declaration names (fetched
// from ARTIFACTS, their digests checked) into --programs, runs each
// declared module as its own process from there, and reports what it runs
// and installed.
//
//	mesh-host run --token FILE --state DIR [--programs DIR] [--module-ids FIRST-LAST] [--heartbeat D] [--report-every D] [--token-refused-for D]
//
// Each module runs as an OS user and group of its own, allotted from
// --module-ids and kept in the state, in a home of its own, with an
// environment made for it: it can read its own credential and nothing
// else of the host's. That takes root (CAP_SETUID, CAP_SETGID,
// CAP_CHOWN); without them a host given --programs refuses to start.
//
// Logs are JSON lines on stderr; "ready" once connected as itself. Exit
// status: 0 stopped by SIGTERM or SIGINT (or help), 1 refused or failed
// (a refused enrolment says why), 2 bad usage, 3 a new token is needed:
// the bus refused the token's login for --token-refused-for (spent, its
// grace over; expired; revoked), as it does to a host killed after its
// enrolment was answered and before it kept the answer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshbus/mesh/mesh/host"
)

const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitToken  = 3
	usageLine  = "usage: mesh-host run --token FILE --state DIR [--programs DIR] [--module-ids FIRST-LAST] [--heartbeat D] [--report-every D] [--token-refused-for D]"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usageLine)
		return exitOK
	case "run":
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", args[0], usageLine)
		return exitUsage
	}
	fs := flag.NewFlagSet("mesh-host run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o host.Options
	fs.StringVar(&o.TokenFile, "token", "", "the enrolment token (the credential mesh-controller token issue printed); read only until the node is enrolled")
	fs.StringVar(&o.State.Dir, "state", "", "the host's state directory")
	fs.DurationVar(&o.Heartbeat, "heartbeat", host.DefaultHeartbeat, "how often the host says it is alive")
	fs.StringVar(&o.Programs, "programs", "", "the directory of the modules' programs, <module> (where installation puts a module's declared artifact), else "+host.DefaultProgram+"; empty, the host runs no module")
	ids := host.DefaultIDRange.String()
	fs.StringVar(&ids, "module-ids", ids, "the span of user and group ids the host allots its modules from, FIRST-LAST, one each; keep it free of the machine's own users")
	fs.DurationVar(&o.TokenRefusedFor, "token-refused-for", host.DefaultTokenRefusedFor, "how long the bus may refuse the token's login before the host stops, saying a new token is needed (exit status 3)")
	fs.DurationVar(&o.ReportEvery, "report-every", host.DefaultReportEvery, "how often the host reports what it runs, even unchanged")
	var err error
	if err = fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if o.State.Dir == "" || fs.NArg() > 0 || o.Heartbeat <= 0 || o.ReportEvery <= 0 || o.TokenRefusedFor <= 0 {
		fmt.Fprintf(stderr, "mesh-host run: --state is required, --heartbeat, --report-every and --token-refused-for positive, nothing else\n%s\n", usageLine)
		return exitUsage
	}
	if o.ModuleIDs, err = host.ParseIDRange(ids); err != nil {
		fmt.Fprintf(stderr, "mesh-host run: --module-ids: %v\n%s\n", err, usageLine)
		return exitUsage
	}
	o.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	if err := host.Run(ctx, o); err != nil {
		o.Logger.Error("failed", "err", err, "refused", errors.Is(err, host.ErrRefused))
		fmt.Fprintf(stderr, "mesh-host: %v\n", err)
		if errors.Is(err, host.ErrTokenRefused) {
			return exitToken
		}
		return exitFailed
	}
	return exitOK
}
