// Command mesh-controller is the mesh's controller: genesis raises a
// mesh's state from nothing, apply recomposes it after the description
// changed, run asserts the bus's streams and consumers and stays up,
// keeping the status and handling CONTROL (enrolments), status prints the
// status, token issue mints an enrolment token, and amqp mints the AMQP
// bus the mesh is leaving.
//
//	mesh-controller genesis     --mesh FILE --state DIR [--store URL] [--bcrypt-cost N] [--bus nats|amqp]
//	mesh-controller apply       --mesh FILE --state DIR [--store URL] [--bcrypt-cost N]
//	mesh-controller run         --mesh FILE --state DIR [--store URL]
//	mesh-controller status      --state DIR | --store URL [--json]
//	mesh-controller token issue --mesh FILE --state DIR [--store URL] [--ttl D] NODE
//	mesh-controller person issue --mesh FILE --state DIR [--store URL] (--tools LIST | --admin) --key KEY NAME
//	mesh-controller person revoke --mesh FILE --state DIR [--store URL] NAME
//	mesh-controller person list --state DIR | --store URL
//	mesh-controller credential  --state DIR | --store URL USER
//	mesh-controller push        --mesh FILE --state DIR [--store URL]
//	mesh-controller amqp        --mesh FILE --state DIR [--store URL] --addr HOST:PORT [--name NAME]...
//	mesh-controller adopt       --mesh FILE --state DIR [--store URL] --config FILE [--monitor URL] [--within D]
//	mesh-controller cutover     --mesh FILE --state DIR [--store URL] [--within D] [--wait D] [--json]
//
// genesis --bus amqp raises the mesh on the bus it has today: its
// credentials name the broker of the description's amqp:, whose
// certificate, key and first definitions (the mesh's users and grants, and
// the controller's administrator) go into the state directory's amqp/ for
// the broker to start with; from then on the controller changes its users
// and grants live, through the management API (docs/control-plane.md).
//
// The controller's state is kept in the state directory's files, or, with
// --store postgres://…, in that PostgreSQL database (mesh/controller/pgstore),
// which must be the controller's alone; the state directory then holds
// only the nats/ the nats container reads (and amqp/).
//
// push sends the description (--mesh) to the running controller, which
// validates it whole and applies it in one transaction (its users, the
// nodes' declarations at their next revision), or changes nothing; it
// prints CONTROL's sequence of the push.
//
// credential prints the credential document the store holds for USER.
//
// token issue prints the token: the enrolment credential (JSON) the node
// enrols with, once, before it expires (--ttl, default 24h). Its user is
// composed into nats.conf at once, live through the watcher.
//
// person issue issues a person a user on the bus (design 25 §7) whose
// grant is the tools it may call: --tools, a comma-separated list of
// "<module or seat>.<tool>" or "<module or seat>.*", or --admin, every
// tool the manifests declare; every person may also ask the catalogue. It
// prints the person's credential sealed to --key, the public key the
// person's client made (mesh key new), which only that client opens
// (mesh credential open). Issued again, a person gets the new grant and a
// new password. person revoke removes the user at once: the server closes
// the person's open connections. person list prints the persons issued.
//
// amqp mints the AMQP bus beside a mesh on NATS (design 25 §1): a
// broker certificate for each --name (default the host of --addr) from
// the mesh's authority, a password per principal, the broker's
// definitions, and every principal's credential for --addr, into the state
// directory's amqp/. Each run rotates every password.
//
// adopt puts the NATS server standing beside the broker of a mesh on AMQP
// into seat mesh-broker, in place (design 25 §9 step 2; docs/decisions/
// 0012-adoption.md): --config is the configuration file the server
// watches, read as it was raised and written from then on (what it was
// raised with kept, the mesh's accounts beside its own); --monitor its
// monitoring endpoint (default the description's bus.monitor). It is
// refused, nothing changed, on a mesh on NATS, where the seat is held or
// assigned to a node, and where the server does not answer or its
// configuration cannot be read or kept. It prints the seat as JSON once
// the server has loaded the composition; an adoption stopped after it
// recorded the seat is completed by adopt run again or by the running
// controller.
//
// cutover moves a mesh on AMQP to the NATS server adopted beside its
// broker, in one rollout (design 25 §9 step 5; docs/decisions/
// 0013-cutover.md): it records the cutover under its next generation (or
// joins the one in progress), which the running controller then drives
// through its phases (compose, prepare, switch, retire), and follows it,
// a line per phase, until it ends or --wait is over. Refused, nothing
// changed: a mesh on NATS (one whose cutover completed says so), no
// server adopted, the adopted server not answering. It exits 0 once the
// mesh is on NATS with nothing of it left on the broker, 1 if prepare
// stopped it (naming the nodes that could not move; the mesh stays on
// AMQP) or --wait is over first. --within bounds how long prepare waits
// for every node, and after how long status names a node not heard on
// NATS since the switch overdue; such a node is still waited for and
// switches when it comes back, or the operator pushes a description
// without it and the cutover ends without it.
//
// Logs are JSON lines on stderr; genesis, apply and amqp print a JSON
// summary on stdout, status a line per provision its provider keeps
// failing (or the whole status as JSON); help, -h or --help (alone or
// after a command) prints the usage on stdout. Exit status: 0 done (or
// help), 1 refused or failed, 2 bad usage.
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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/printable"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	usageLine  = "usage: mesh-controller genesis --mesh FILE --state DIR [--store postgres://…] [--bcrypt-cost N] [--bus nats|amqp]\n" +
		"       mesh-controller apply|run --mesh FILE --state DIR [--store postgres://…] [--bcrypt-cost N]\n" +
		"       mesh-controller status --state DIR | --store postgres://… [--json]\n" +
		"       mesh-controller token issue --mesh FILE --state DIR [--store postgres://…] [--ttl D] NODE\n" +
		"       mesh-controller person issue --mesh FILE --state DIR [--store postgres://…] (--tools LIST | --admin) --key PUBLIC-KEY NAME\n" +
		"       mesh-controller person revoke --mesh FILE --state DIR [--store postgres://…] NAME\n" +
		"       mesh-controller person list --state DIR | --store postgres://…\n" +
		"       mesh-controller credential --state DIR | --store postgres://… USER\n" +
		"       mesh-controller push --mesh FILE --state DIR [--store postgres://…]\n" +
		"       mesh-controller amqp --mesh FILE --state DIR [--store postgres://…] --addr HOST:PORT [--name NAME]...\n" +
		"       mesh-controller adopt --mesh FILE --state DIR [--store postgres://…] --config FILE [--monitor URL] [--within D]\n" +
		"       mesh-controller cutover --mesh FILE --state DIR [--store postgres://…] [--within D] [--wait D] [--json]"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand: its flags beside the common ones, a check of
// what they say (a usage error), and what it does with the store.
type command struct {
	// needsMesh: --mesh and --state are required (status needs only a
	// store).
	needsMesh bool
	// args says how many positional arguments it takes, and their names.
	args  []string
	flags func(fs *flag.FlagSet, c *call)
	check func(c *call) error
	do    func(ctx context.Context, c *call, st store.Store) error
}

// call is one run of a command: what its flags said.
type call struct {
	name            string
	stateDir, store string
	meshFile        string
	args            []string
	stdout          io.Writer
	log             *slog.Logger

	// The flags some commands have.
	bcryptCost int
	bus        rollout.Bus
	asJSON     bool
	ttl        time.Duration
	addr       string
	names      names
	tools      list
	admin      bool
	key        string
	config     string
	monitor    string
	within     time.Duration
	wait       time.Duration
	// run's settings of its waits: production's by default.
	eventsAckWait time.Duration
	liveEvery     time.Duration
	declareEvery  time.Duration
	grace         time.Duration
}

func commands() map[string]command {
	return map[string]command{
		"genesis":       genesisCmd(),
		"apply":         applyCmd(),
		"run":           runCmd(),
		"status":        statusCmd(),
		"token issue":   tokenCmd(),
		"person issue":  personIssueCmd(),
		"person revoke": personRevokeCmd(),
		"person list":   personListCmd(),
		"amqp":          amqpCmd(),
		"credential":    credentialCmd(),
		"push":          pushCmd(),
		"adopt":         adoptCmd(),
		"cutover":       cutoverCmd(),
	}
}

// verbsOf are the commands that take a verb, and their verbs.
var verbsOf = map[string][]string{
	"token":  {"issue"},
	"person": {"issue", "revoke", "list"},
}

// flagsFirst moves the flags of args before its positional arguments, so
// that "person issue alice --tools x" reads as "--tools x alice": the flag
// package stops at the first positional argument. A flag's value is kept
// with it; "--" ends the flags as it does for the flag package.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return append(flags, positional...)
}

// run is the whole program but for the process: testable in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usageLine)
		return exitOK
	}
	rest := args[1:]
	if verbs, ok := verbsOf[name]; ok {
		if len(rest) == 0 || !slices.Contains(verbs, rest[0]) {
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help") {
				fmt.Fprintln(stdout, usageLine)
				return exitOK
			}
			fmt.Fprintf(stderr, "mesh-controller %s: the verb is one of %s\n%s\n", name, strings.Join(verbs, ", "), usageLine)
			return exitUsage
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", name, usageLine)
		return exitUsage
	}
	c := &call{name: name, stdout: stdout, log: slog.New(slog.NewJSONHandler(stderr, nil)).With("cmd", name)}
	fs := flag.NewFlagSet("mesh-controller "+name, flag.ContinueOnError)
	fs.StringVar(&c.stateDir, "state", "", "the state directory")
	fs.StringVar(&c.store, "store", "", "keep the controller's state in this PostgreSQL database (postgres://…), the controller's alone; default the state directory's files")
	if cmd.needsMesh {
		fs.StringVar(&c.meshFile, "mesh", "", "the mesh description (YAML)")
	}
	if cmd.flags != nil {
		cmd.flags(fs, c)
	}
	if code, ok := parse(fs, flagsFirst(fs, rest), stdout, stderr); !ok {
		return code
	}
	c.args = fs.Args()
	if err := checkCall(cmd, c); err != nil {
		fmt.Fprintf(stderr, "mesh-controller %s: %v\n%s\n", name, err, usageLine)
		return exitUsage
	}
	err := withStore(ctx, c.store, c.stateDir, func(st store.Store) error { return cmd.do(ctx, c, st) })
	if err != nil {
		c.log.Error("failed", "err", err, "drift", errors.Is(err, controller.ErrDrift), "store_unavailable", errors.Is(err, store.ErrStoreUnavailable))
		// The plain text as well: a refused description lists its entries
		// one per line, which a JSON string makes unreadable.
		fmt.Fprintf(stderr, "mesh-controller %s: %v\n", name, err)
		return exitFailed
	}
	return exitOK
}

// checkCall refuses what no run of cmd could take.
func checkCall(cmd command, c *call) error {
	if len(c.args) != len(cmd.args) {
		if len(cmd.args) == 0 {
			return fmt.Errorf("unexpected arguments %q", c.args)
		}
		return fmt.Errorf("expected %s, got %d argument(s)", strings.Join(cmd.args, " "), len(c.args))
	}
	if cmd.needsMesh && (c.meshFile == "" || c.stateDir == "") {
		return errors.New("--mesh and --state are required")
	}
	if !cmd.needsMesh && (c.stateDir == "") == (c.store == "") {
		return errors.New("--state or --store is required, not both")
	}
	if !storeOK(c.store) {
		return errors.New("--store must be a postgres:// or postgresql:// URL")
	}
	if cmd.check != nil {
		return cmd.check(c)
	}
	return nil
}

// storeOK says whether --store names a store this program opens: none
// (the state directory's files) or a PostgreSQL URL.
func storeOK(url string) bool {
	return url == "" || strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// withStore runs fn with the store --store names, or the state
// directory's files without it, and closes it after.
func withStore(ctx context.Context, url, stateDir string, fn func(store.Store) error) error {
	if url == "" {
		return fn(store.FileStore(stateDir))
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

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	// What other principals wrote is in it (a report, a refusal, a
	// build's error): escaped as JSON escapes, so that it stays the same
	// JSON and a terminal shown it acts on nothing (issue 18).
	_, err = fmt.Fprintf(w, "%s\n", printable.JSON(b))
	return err
}
