// Command mesh-controller is the mesh's controller: genesis raises a
// mesh's state from nothing, apply recomposes it after the description
// changed, run asserts the bus's streams and consumers and stays up,
// keeping the status, and status prints it.
//
//	mesh-controller genesis --mesh FILE --state DIR [--store URL] [--bcrypt-cost N]
//	mesh-controller apply   --mesh FILE --state DIR [--store URL] [--bcrypt-cost N]
//	mesh-controller run     --mesh FILE --state DIR [--store URL]
//	mesh-controller status  --state DIR | --store URL [--json]
//	mesh-controller amqp    --mesh FILE --state DIR [--store URL] --addr HOST:PORT [--name NAME]...
//
// The controller's state is kept in the state directory's files, or, with
// --store postgres://…, in that PostgreSQL database (mesh/controller/pgstore),
// which must be the controller's alone; the state directory then holds
// only the nats/ the nats container reads (and amqp/).
//
// amqp mints the AMQP bus the mesh had before NATS (design 25 §1): a
// broker certificate for each --name (default the host of --addr) from
// the mesh's authority, a password per principal, the broker's
// definitions, and every principal's credential for --addr, into the state
// directory's amqp/. Each run rotates every password.
//
// Logs are JSON lines on stderr; genesis and apply print a JSON summary on
// stdout, status a line per provision its provider keeps failing (or the
// whole status as JSON); help, -h or --help (alone or after a command)
// prints the usage on stdout. Exit status: 0 done (or help), 1 refused or
// failed, 2 bad usage.
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
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	usageLine  = "usage: mesh-controller genesis|apply|run --mesh FILE --state DIR [--store postgres://…] [--bcrypt-cost N]\n" +
		"       mesh-controller status --state DIR | --store postgres://… [--json]\n" +
		"       mesh-controller amqp --mesh FILE --state DIR [--store postgres://…] --addr HOST:PORT [--name NAME]..."
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
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usageLine)
		return exitOK
	}
	fs := flag.NewFlagSet("mesh-controller "+cmd, flag.ContinueOnError)
	stateDir := fs.String("state", "", "the state directory")
	storeURL := fs.String("store", "", "keep the controller's state in this PostgreSQL database (postgres://…), the controller's alone; default the state directory's files")
	if cmd == "status" {
		asJSON := fs.Bool("json", false, "print the whole status as JSON")
		if code, ok := parse(fs, args[1:], stdout, stderr); !ok {
			return code
		}
		if (*stateDir == "") == (*storeURL == "") || fs.NArg() > 0 {
			fmt.Fprintf(stderr, "mesh-controller status: --state or --store is required, nothing else\n%s\n", usageLine)
			return exitUsage
		}
		if !storeOK(*storeURL) {
			fmt.Fprintf(stderr, "mesh-controller status: --store must be a postgres:// or postgresql:// URL\n")
			return exitUsage
		}
		err := withStore(ctx, *storeURL, *stateDir, func(st controller.Store) error { return printStatus(ctx, stdout, st, *asJSON) })
		if err != nil {
			fmt.Fprintf(stderr, "mesh-controller status: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	meshFile := fs.String("mesh", "", "the mesh description (YAML)")
	cost := bcrypt.DefaultCost
	if cmd == "genesis" || cmd == "apply" {
		fs.IntVar(&cost, "bcrypt-cost", bcrypt.DefaultCost, "bcrypt cost of the password hashes")
	}
	var amqpAddr string
	var amqpNames names
	if cmd == "amqp" {
		fs.StringVar(&amqpAddr, "addr", "", "the broker's address in the credentials (host:port)")
		fs.Var(&amqpNames, "name", "a name of the broker's certificate (repeat; default the host of --addr)")
	}
	switch cmd {
	case "genesis", "apply", "run", "amqp":
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", cmd, usageLine)
		return exitUsage
	}
	if code, ok := parse(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	if *meshFile == "" || *stateDir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mesh-controller %s: --mesh and --state are required, nothing else\n%s\n", cmd, usageLine)
		return exitUsage
	}
	if !storeOK(*storeURL) {
		fmt.Fprintf(stderr, "mesh-controller %s: --store must be a postgres:// or postgresql:// URL\n", cmd)
		return exitUsage
	}
	if cmd == "amqp" {
		host, _, err := net.SplitHostPort(amqpAddr)
		if err != nil {
			fmt.Fprintf(stderr, "mesh-controller amqp: --addr %q is not host:port\n%s\n", amqpAddr, usageLine)
			return exitUsage
		}
		if len(amqpNames) == 0 {
			amqpNames = names{host}
		}
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
		return withStore(ctx, *storeURL, *stateDir, func(st controller.Store) error {
			switch cmd {
			case "genesis":
				res, err := controller.Genesis(ctx, m, st, *stateDir, opts)
				if err != nil {
					return err
				}
				return printJSON(stdout, res)
			case "apply":
				res, err := controller.Apply(ctx, m, st, *stateDir, opts)
				if err != nil {
					return err
				}
				return printJSON(stdout, res)
			case "amqp":
				b, err := controller.WriteAMQP(ctx, m, st, *stateDir, amqpAddr, controller.AMQPOptions{Names: amqpNames})
				if err != nil {
					return err
				}
				return printJSON(stdout, struct {
					Users       []string `json:"users"`
					Fingerprint string   `json:"fingerprint"`
				}{b.Users, b.Fingerprint})
			default:
				return controller.Run(ctx, m, st, controller.RunOptions{Logger: log})
			}
		})
	}()
	if err != nil {
		log.Error("failed", "err", err, "drift", errors.Is(err, controller.ErrDrift), "store_unavailable", errors.Is(err, controller.ErrStoreUnavailable))
		// The plain text as well: a refused description lists its entries
		// one per line, which a JSON string makes unreadable.
		fmt.Fprintf(stderr, "mesh-controller %s: %v\n", cmd, err)
		return exitFailed
	}
	return exitOK
}

// storeOK says whether --store names a store this program opens: none
// (the state directory's files) or a PostgreSQL URL.
func storeOK(url string) bool {
	return url == "" || strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// withStore runs fn with the store --store names, or the state
// directory's files without it, and closes it after.
func withStore(ctx context.Context, url, stateDir string, fn func(controller.Store) error) error {
	if url == "" {
		return fn(controller.FileStore(stateDir))
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// parse parses a command's flags. Asked for help (-h, --help), it prints
// the usage and the flags on stdout and the command ends with exitOK; a
// bad flag is reported on stderr and ends it with exitUsage. ok is true
// when the command goes on.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() {
		fmt.Fprintf(&out, "%s\n\nFlags of %s:\n", usageLine, fs.Name())
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return exitOK, false
	case err != nil:
		_, _ = stderr.Write(out.Bytes())
		return exitUsage, false
	}
	fs.SetOutput(stderr)
	return 0, true
}

// names is a flag that may be given more than once.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(v string) error {
	if v == "" {
		return errors.New("empty name")
	}
	*n = append(*n, v)
	return nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printStatus prints the status held in the store: as JSON, or as a line
// per provision its provider keeps failing, which is what a person reading
// it needs first.
func printStatus(ctx context.Context, w io.Writer, store controller.Store, asJSON bool) error {
	if _, err := store.Secrets(ctx); err != nil {
		return err // no genesis: say so rather than print an empty status
	}
	st, err := store.Status(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, st)
	}
	if len(st.Failing) == 0 {
		_, err := fmt.Fprintln(w, "no provision is failing")
		return err
	}
	fmt.Fprintf(w, "%d provision(s) failing:\n", len(st.Failing))
	for _, f := range st.Failing {
		if _, err := fmt.Fprintf(w, "  %s fails %s on %s: %s since %s (said %s by %s, event %s)\n",
			f.Provider, f.Consumer, f.Node, f.Class, f.Since.Format(time.RFC3339), f.Said.Format(time.RFC3339), f.ReportedBy, f.EventID); err != nil {
			return err
		}
	}
	return nil
}
