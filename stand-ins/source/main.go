// Command source is the beds' stand-in for a source repository, the build
// source of design 25 §1 and §9 step 4, which in a real mesh is a code
// host's repository and a hook that announces its pushes. It holds
// revisions as files, answers the builders' fetches of exactly one
// revision (wire.SourceFetch), and announces a new revision on
// wire.SourceChanged into CONTROL, so that a bed can commit, see the
// controller ask for a build, and slow the answers down to catch a
// builder mid-build. It connects as the repository's user
// (wire.PrincipalSource), whose name is the repository's, on the bus its
// credential's scheme names (package buses).
package main

import (
	"bytes"
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
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `source is the beds' stand-in for a source repository.

Usage:
  source serve  --credential FILE --repo DIR [--delay D]
  source commit --credential FILE --repo DIR --module M --revision R --content TEXT [--timeout D]

A repository holds revision R of module M as the file DIR/M/R, whose bytes
are the revision's content. Its name is its credential's (principal
"source", name <repo>).

serve answers the builders' fetches on mesh.source.<repo>.fetch from DIR
until SIGTERM or SIGINT; --delay makes each answer wait D first. On AMQP
fetches are not carried yet: serve exits 1, saying so.

commit writes revision R of module M with content TEXT into DIR (a
temporary file and a rename; a revision already there with other content
is refused, the same content is announced again), announces it on
mesh.control.source.<repo>.changed into CONTROL (JetStream on NATS, the
exchange mesh.control on AMQP, by the credential's scheme), waits for its
acknowledgement (--timeout, default 10s) and prints the announcement as
one JSON line.

Exit status: 0 served until told to stop, or committed and announced (or
help: help, -h, --help, <command> --help); 1 the credential, the
directory, the bus or the acknowledgement failed; 2 bad usage (flags, a
module name, a revision or a content the wire refuses).
`

// run is main with its outside world passed in; it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch args[0] {
	case "serve", "commit":
	default:
		fmt.Fprintf(stderr, "source: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	fs.Usage = func() {
		fmt.Fprintf(&flagOut, "%s\nFlags of %s:\n", usage, cmd)
		fs.PrintDefaults()
	}
	credFile := fs.String("credential", "", "the repository's credential `file`")
	dir := fs.String("repo", "", "the repository's `directory`")
	var (
		delay                     *time.Duration
		timeout                   *time.Duration
		module, revision, content *string
	)
	if cmd == "serve" {
		delay = fs.Duration("delay", 0, "wait `D` before each answer")
	} else {
		module = fs.String("module", "", "the module `M`")
		revision = fs.String("revision", "", "the revision `R`")
		content = fs.String("content", "", "the revision's content `TEXT`")
		timeout = fs.Duration("timeout", 10*time.Second, "wait `D` for the bus and CONTROL's acknowledgement")
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = stdout.Write(flagOut.Bytes())
			return 0
		}
		_, _ = stderr.Write(flagOut.Bytes())
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "source %s: %s\n\n%s", cmd, fmt.Sprintf(format, a...), usage)
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	if *credFile == "" || *dir == "" {
		return bad("--credential FILE and --repo DIR are required")
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("program", "source", "command", cmd)
	fail := func(err error) int {
		log.Error("source "+cmd+" failed", "err", err)
		fmt.Fprintf(stderr, "source %s: %v\n", cmd, err)
		return 1
	}
	repo := repository{dir: *dir}
	if cmd == "serve" {
		if *delay < 0 {
			return bad("--delay %s is negative", *delay)
		}
		if fi, err := os.Stat(*dir); err != nil {
			return fail(fmt.Errorf("repository directory: %w", err))
		} else if !fi.IsDir() {
			return fail(fmt.Errorf("repository directory %s is not a directory", *dir))
		}
		cred, err := loadCredential(*credFile)
		if err != nil {
			return fail(err)
		}
		bus, err := dial(ctx, cred, 10*time.Second, log)
		if err != nil {
			return fail(err)
		}
		defer func() { _ = bus.Close() }()
		if err := serve(ctx, bus, cred.Name, repo, *delay, log); err != nil {
			return fail(err)
		}
		return 0
	}

	switch {
	case *module == "" || *revision == "":
		return bad("--module M and --revision R are required")
	case *timeout <= 0:
		return bad("--timeout %s is not positive", *timeout)
	}
	if err := checkRevision(*module, *revision); err != nil {
		return bad("%v", err)
	}
	if *content == "" {
		return bad("--content TEXT is required, and not empty: an empty revision cannot be carried")
	}
	if len(*content) > wire.MaxSourceContent {
		return bad("--content is %d bytes, more than a revision may carry (%d)", len(*content), wire.MaxSourceContent)
	}
	cred, err := loadCredential(*credFile)
	if err != nil {
		return fail(err)
	}
	if err := repo.write(*module, *revision, []byte(*content)); err != nil {
		return fail(fmt.Errorf("write revision %s of %s: %w", *revision, *module, err))
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	bus, err := dial(cctx, cred, *timeout, log)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = bus.Close() }()
	change, err := announce(cctx, bus, cred.Password(), cred.Name, *module, *revision, time.Now())
	if err != nil {
		return fail(fmt.Errorf("revision %s of %s is written but not announced: %w", *revision, *module, err))
	}
	line, _ := json.Marshal(change)
	fmt.Fprintf(stdout, "%s\n", line)
	log.Info("revision committed and announced", "repo", change.Repo, "module", change.Module, "revision", change.Revision)
	return 0
}

// loadCredential reads a source repository's credential.
func loadCredential(path string) (wire.Credential, error) {
	cred, err := wire.ReadCredentialFile(path)
	if err != nil {
		return wire.Credential{}, err
	}
	if cred.Principal != wire.PrincipalSource {
		return wire.Credential{}, fmt.Errorf("credential %s: principal %q, want %q (a source repository's)", path, cred.Principal, wire.PrincipalSource)
	}
	return cred, nil
}

// dial connects as the repository, on the bus its credential's scheme
// names (package buses), trying again until timeout while the server
// refuses it for a moment; what the bus reports after the fact (a
// permissions violation) is logged.
func dial(ctx context.Context, cred wire.Credential, timeout time.Duration, log *slog.Logger) (plane.Source, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var src plane.Source
	err := link.Retry(dctx, log, "connect", min(timeout, dialAttempt), func(ctx context.Context) (bool, error) {
		var err error
		src, err = buses.DialSource(ctx, cred, link.WithName(wire.SourceUser(cred.Name)), link.WithConnectionLog(log))
		return buses.DialAgain(err), err
	})
	return src, err
}

// dialAttempt bounds each attempt at the first connection (buses.DialAgain
// says which are tried again, until the dial's timeout).
const dialAttempt = 10 * time.Second
