// Command mesh-build is the build path's front door (design 25 §1, §9
// step 4). Its check runs before every build: a module whose manifest
// uses a capability its language's SDK does not claim
// (conformance/registry.yaml) is refused, with the reason, before
// anything is compiled (design 19, "A partial SDK is legitimate"). Its
// serve is the builder: on the bus its credential's scheme names
// (package buses), it takes the controller's build requests one at a
// time, fetches exactly the revision asked for from its source
// repository, stores the artifact and records the outcome in CONTROL
// (package build).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `mesh-build checks modules before they are built, and builds them.

Usage:
  mesh-build check --mesh FILE [--module NAME]
  mesh-build serve --credential FILE --toolchain DIR [--name NAME]

check refuses every module of the description (or only NAME) that uses a
capability its language's SDK does not implement, naming the module, the
capability and the manifest fields that need it.

serve is a builder: with the builder's credential FILE it takes the build
requests one at a time (BUILDS on NATS, builds on AMQP: the credential's
scheme says which), fetches the revision asked for from its source
repository, makes the artifact from the module's program in the
toolchain, DIR/<module>, with the revision's provenance after it, stores
it (ARTIFACTS) and publishes the outcome into CONTROL, named NAME (default
the host name), before it acks the request. It logs JSON lines on stderr
and runs until SIGTERM or SIGINT. On AMQP it takes requests and sends
outcomes, but fetching a revision and storing an artifact are not carried
yet: it gives the request back and exits 1, saying so.

Exit status: 0 every module checked can be built, or serve was told to
stop (or help: help, -h, --help, <command> --help); 1 a module is
refused, the description is invalid, or serve failed (its credential,
its toolchain, the bus, a flow the bus does not carry); 2 bad usage (no command among it).
`

// run is main with its outside world passed in; it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// No command is bad usage, as with every other CLI of the project.
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch args[0] {
	case "check":
		return check(args[1:], stdout, stderr)
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "mesh-build: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// flags is the flag set of command, its usage the program's and then its
// own flags; parse reports the exit status when the command is not to
// run (help: 0, bad flags: 2).
func flags(command string) (*flag.FlagSet, func(args []string, stdout, stderr io.Writer) (int, bool)) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	fs.Usage = func() {
		fmt.Fprintf(&flagOut, "%s\nFlags of %s:\n", usage, command)
		fs.PrintDefaults()
	}
	return fs, func(args []string, stdout, stderr io.Writer) (int, bool) {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				_, _ = stdout.Write(flagOut.Bytes())
				return 0, false
			}
			_, _ = stderr.Write(flagOut.Bytes())
			return 2, false
		}
		return 0, true
	}
}

func check(args []string, stdout, stderr io.Writer) int {
	fs, parse := flags("check")
	meshFile := fs.String("mesh", "", "the mesh description")
	module := fs.String("module", "", "check only this module")
	if code, ok := parse(args, stdout, stderr); !ok {
		return code
	}
	if *meshFile == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mesh-build check: --mesh FILE is required and nothing else\n\n%s", usage)
		return 2
	}
	m, err := meshdesc.Load(*meshFile)
	if err != nil {
		fmt.Fprintf(stderr, "mesh-build check: %v\n", err)
		return 1
	}
	reg, err := conformance.Load()
	if err != nil {
		fmt.Fprintf(stderr, "mesh-build check: %v\n", err)
		return 1
	}
	if *module != "" {
		mod, ok := m.Module(*module)
		if !ok {
			fmt.Fprintf(stderr, "mesh-build check: no module %q in %s\n", *module, *meshFile)
			return 1
		}
		err = reg.CheckModule(mod)
	} else {
		err = reg.CheckMesh(m)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mesh-build check: refused:\n%v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "mesh-build check: %s: every module can be built\n", *meshFile)
	return 0
}
