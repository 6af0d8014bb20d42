// Command driver is the Go SDK's conformance driver (docs/conformance.md):
// the bed runs it once per command in a container, with a module's
// credential, and reads what it did as JSON lines. It talks to the bus
// through mesh/sdk and nothing else.
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
	"sync"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/sdk/provision"
	"github.com/meshbus/mesh/mesh/wire"
)

// Exit statuses of the protocol. Help (help, -h, --help, alone or after a
// command) prints the usage on stdout and exits exitRan.
const (
	exitRan   = 0
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `driver COMMAND [FLAGS] — the Go SDK's conformance driver (docs/conformance.md)

Commands:
  connect
  emit --fixture FILE
  consume --pattern P [--pattern P ...] --count N --timeout D [--fail | --fail-for D]
  serve --tool T --duration D [--fail MESSAGE] [--panic]
  call --module M --tool T --args JSON --timeout D
  grant --file FILE

The module's credential is the file $MESH_CREDENTIAL names.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out := &printer{w: stdout}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, flags := args[0], args[1:]
	if isHelp(cmd) || cmd == "help" {
		fmt.Fprint(stdout, usage)
		return exitRan
	}
	commands := map[string]func(context.Context, []string, *printer, *slog.Logger) error{
		"connect": connect,
		"emit":    emit,
		"consume": consume,
		"serve":   serve,
		"call":    call,
		"grant":   grant,
	}
	do, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "driver: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	err := do(ctx, flags, out, log)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitRan
	}
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(stderr, "driver %s: %v\n\n%s", cmd, err, usage)
		return exitUsage
	}
	out.done(err)
	return exitRan
}

// usageError is a command misused.
type usageError struct{ error }

// misuse is a command's refusal of its flags: flag.ErrHelp when it was
// asked for help (-h, --help), else a usageError saying what it requires.
func misuse(err error, required string) error {
	if errors.Is(err, flag.ErrHelp) {
		return flag.ErrHelp
	}
	return usageError{errors.New(required)}
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// printer writes the protocol's JSON lines.
type printer struct{ w io.Writer }

func (p *printer) line(kind string, fields map[string]any) {
	obj := map[string]any{"kind": kind}
	for k, v := range fields {
		obj[k] = v
	}
	b, _ := json.Marshal(obj)
	fmt.Fprintf(p.w, "%s\n", b)
}

func (p *printer) done(err error) {
	if err == nil {
		p.line("done", map[string]any{"ok": true})
		return
	}
	p.line("done", map[string]any{"ok": false, "class": class(err), "message": err.Error()})
}

// class is the protocol's name for what went wrong.
func class(err error) string {
	var tool *sdk.ToolError
	switch {
	case errors.As(err, &tool):
		return "tool"
	case errors.Is(err, sdk.ErrFingerprint):
		return "fingerprint"
	case errors.Is(err, sdk.ErrBootstrap):
		return "bootstrap"
	case errors.Is(err, wire.ErrBadCredential):
		return "credential"
	case errors.Is(err, sdk.ErrNoConsumer):
		return "no_consumer"
	case errors.Is(err, sdk.ErrDenied):
		return "denied"
	case errors.Is(err, sdk.ErrNoResponders):
		return "no_responders"
	case errors.Is(err, sdk.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other"
}

func connectModule(ctx context.Context, log *slog.Logger) (*sdk.Module, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return sdk.Connect(cctx, "", sdk.WithLogger(log))
}

func connect(ctx context.Context, args []string, out *printer, log *slog.Logger) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			return flag.ErrHelp
		}
		return usageError{fmt.Errorf("connect takes no flags")}
	}
	m, err := connectModule(ctx, log)
	if err != nil {
		return err
	}
	defer m.Close()
	out.line("identity", map[string]any{
		"node": m.Node(), "module": m.Name(),
		"env_node": os.Getenv(wire.EnvNode), "env_module": os.Getenv(wire.EnvModule),
	})
	return nil
}

// eventFixture is the part of an event fixture an emitter reads.
type eventFixture struct {
	Key       string `json:"key"`
	ID        string `json:"id"`
	Time      string `json:"time"`
	Causation string `json:"causation"`
	Schema    string `json:"schema"`
	Body      string `json:"body"`
}

func emit(ctx context.Context, args []string, out *printer, log *slog.Logger) error {
	fs := flag.NewFlagSet("emit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("fixture", "", "the event fixture")
	if err := fs.Parse(args); err != nil || *file == "" {
		return misuse(err, "--fixture FILE is required")
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	var f eventFixture
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("read fixture %s: %w", *file, err)
	}
	at, err := wire.ParseTime(f.Time)
	if err != nil {
		return fmt.Errorf("read fixture %s: %w", *file, err)
	}
	opts := []sdk.PublishOption{sdk.WithEventID(f.ID), sdk.WithTime(at)}
	if f.Causation != "" {
		opts = append(opts, sdk.WithCausation(f.Causation))
	}
	if f.Schema != "" {
		opts = append(opts, sdk.WithSchema(f.Schema))
	}
	m, err := connectModule(ctx, log)
	if err != nil {
		return err
	}
	defer m.Close()
	id, err := m.Publish(ctx, f.Key, []byte(f.Body), opts...)
	if err != nil {
		return err
	}
	out.line("emitted", map[string]any{"id": id})
	return nil
}

// patterns is a repeatable flag.
type patterns []string

func (p *patterns) String() string     { return fmt.Sprint(*p) }
func (p *patterns) Set(v string) error { *p = append(*p, v); return nil }

func consume(ctx context.Context, args []string, out *printer, log *slog.Logger) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var pats patterns
	fs.Var(&pats, "pattern", "a consumed pattern (repeatable)")
	count := fs.Int("count", 1, "stop after this many handled events")
	timeout := fs.Duration("timeout", 10*time.Second, "stop after this long")
	fail := fs.Bool("fail", false, "every handler fails")
	failFor := fs.Duration("fail-for", 0, "a handler fails each event for this long after it first received it, then succeeds")
	if err := fs.Parse(args); err != nil || len(pats) == 0 {
		return misuse(err, "at least one --pattern is required")
	}
	if *fail && *failFor > 0 {
		return usageError{fmt.Errorf("--fail and --fail-for exclude each other")}
	}
	failing := failingFor(*fail, *failFor)
	// The SDK logs an envelope it refuses; the protocol reports it.
	log = slog.New(&refusals{Handler: log.Handler(), out: out})
	m, err := connectModule(ctx, log)
	if err != nil {
		return err
	}
	defer m.Close()
	handled := make(chan struct{}, 1024)
	for _, p := range pats {
		err := m.Subscribe(p, func(_ context.Context, e sdk.Event) error {
			out.line("handled", map[string]any{"event": map[string]any{
				"id": e.ID, "source": e.Source, "node": e.Node, "key": e.Key,
				"time": wire.FormatTime(e.Time), "causation": e.CausationID, "schema": e.Schema,
				"body": string(e.Body),
			}})
			handled <- struct{}{}
			if failing(e.ID) {
				return errors.New("the driver was told to fail")
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	out.line("ready", nil)
	deadline := time.After(*timeout)
	for n := 0; n < *count; n++ {
		select {
		case <-handled:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// failingFor says, per event id, whether the handler fails this time:
// always (--fail), for d after the event was first received (--fail-for:
// an outage the handler rides out), or never.
func failingFor(always bool, d time.Duration) func(id string) bool {
	var mu sync.Mutex
	first := map[string]time.Time{}
	return func(id string) bool {
		switch {
		case always:
			return true
		case d <= 0:
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		at, ok := first[id]
		if !ok {
			at = time.Now()
			first[id] = at
		}
		return time.Since(at) < d
	}
}

// refusals reports the SDK's "envelope refused" log records as protocol
// lines naming what was refused (part) and, for a header, the header.
type refusals struct {
	slog.Handler
	out *printer
}

func (r *refusals) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Message == "envelope refused" {
		fields := map[string]any{}
		rec.Attrs(func(a slog.Attr) bool {
			fields[a.Key] = a.Value.String()
			return true
		})
		r.out.line("refused", fields)
	}
	return r.Handler.Handle(ctx, rec)
}

func (r *refusals) WithAttrs(as []slog.Attr) slog.Handler {
	return &refusals{Handler: r.Handler.WithAttrs(as), out: r.out}
}

func (r *refusals) WithGroup(name string) slog.Handler {
	return &refusals{Handler: r.Handler.WithGroup(name), out: r.out}
}

func serve(ctx context.Context, args []string, out *printer, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tool := fs.String("tool", "", "the tool to serve")
	duration := fs.Duration("duration", 10*time.Second, "how long to serve")
	fail := fs.String("fail", "", "fail every call with this message")
	panicky := fs.Bool("panic", false, "panic in every call")
	if err := fs.Parse(args); err != nil || *tool == "" {
		return misuse(err, "--tool T is required")
	}
	m, err := connectModule(ctx, log)
	if err != nil {
		return err
	}
	defer m.Close()
	err = m.Handle(*tool, func(_ context.Context, a []byte) ([]byte, error) {
		out.line("served", map[string]any{"tool": *tool, "args": string(a)})
		switch {
		case *panicky:
			panic("the driver was told to panic")
		case *fail != "":
			return nil, errors.New(*fail)
		}
		return a, nil
	})
	if err != nil {
		return err
	}
	out.line("ready", nil)
	select {
	case <-time.After(*duration):
	case <-ctx.Done():
	}
	return nil
}

func call(ctx context.Context, args []string, out *printer, log *slog.Logger) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	module := fs.String("module", "", "the module serving the tool")
	tool := fs.String("tool", "", "the tool")
	callArgs := fs.String("args", "{}", "the call's arguments (JSON)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil || *module == "" || *tool == "" {
		return misuse(err, "--module M and --tool T are required")
	}
	m, err := connectModule(ctx, log)
	if err != nil {
		return err
	}
	defer m.Close()
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	body, err := m.Request(cctx, *module, *tool, []byte(*callArgs))
	if err != nil {
		return err
	}
	out.line("result", map[string]any{"body": string(body)})
	return nil
}

func grant(_ context.Context, args []string, out *printer, _ *slog.Logger) error {
	fs := flag.NewFlagSet("grant", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("file", "", "the contributions file")
	if err := fs.Parse(args); err != nil || *file == "" {
		return misuse(err, "--file FILE is required")
	}
	grants, err := provision.ReadGrants(*file)
	if err != nil {
		return err
	}
	for _, g := range grants {
		out.line("grant", map[string]any{"module": g.Consumer.Module, "node": g.Consumer.Node})
	}
	return nil
}
