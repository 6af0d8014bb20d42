package driverproto

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meshbus/mesh/conformance"
)

// Command is one command of a driver with its flags: what the bed runs,
// one per container.
type Command interface {
	// Name is the command's word.
	Name() string
	// Capability is what an implementation claims to run it; a driver
	// answers ExitUnsupported to a command of a capability it does not
	// claim.
	Capability() conformance.Capability
	// Argv is the command line after the driver's own name: the word, then
	// every flag the command has a value for.
	Argv() []string
}

// Connect connects and reports the identity taken from the credential.
type Connect struct{}

// Emit publishes the event fixture File through the SDK.
type Emit struct {
	// Fixture is the event fixture's path in the driver's container.
	Fixture string
}

// Consume subscribes Patterns and reports each event its handlers
// receive, until Count were handled or Timeout passed.
type Consume struct {
	Patterns []string
	Count    int
	Timeout  time.Duration
	// Fail makes every handler fail.
	Fail bool
	// FailFor makes a handler fail each event for this long after it first
	// received that event, then succeed: an outage it rides out.
	FailFor time.Duration
	// RedeliverAfter is the wait after an event's first failed delivery
	// (the SDK's own default where zero), doubled after each: a scenario
	// proving the deliveries, not the outage they ride out, waits less.
	RedeliverAfter time.Duration
}

// Serve serves Tool for Duration, answering each call with its arguments
// unchanged, or failing.
type Serve struct {
	Tool     string
	Duration time.Duration
	// Fail makes every call fail with this message.
	Fail string
	// Panic makes every call's handler panic.
	Panic bool
}

// Call calls Module's Tool with Args and waits Timeout for the answer.
type Call struct {
	Module, Tool string
	// Args is the call's arguments, JSON.
	Args    string
	Timeout time.Duration
}

// ReadGrant reads the contributions file File and reports each entry.
type ReadGrant struct {
	// File is the contributions file's path in the driver's container.
	File string
}

// The commands' words.
const (
	CmdConnect = "connect"
	CmdEmit    = "emit"
	CmdConsume = "consume"
	CmdServe   = "serve"
	CmdCall    = "call"
	CmdGrant   = "grant"
)

// The flags' names, spelled "--name" on a command line.
const (
	FlagFixture        = "fixture"
	FlagPattern        = "pattern"
	FlagCount          = "count"
	FlagTimeout        = "timeout"
	FlagFail           = "fail"
	FlagFailFor        = "fail-for"
	FlagRedeliverAfter = "redeliver-after"
	FlagTool           = "tool"
	FlagDuration       = "duration"
	FlagPanic          = "panic"
	FlagModule         = "module"
	FlagArgs           = "args"
	FlagFile           = "file"
)

// Name is the command's word.
func (Connect) Name() string { return CmdConnect }

// Name is the command's word.
func (Emit) Name() string { return CmdEmit }

// Name is the command's word.
func (Consume) Name() string { return CmdConsume }

// Name is the command's word.
func (Serve) Name() string { return CmdServe }

// Name is the command's word.
func (Call) Name() string { return CmdCall }

// Name is the command's word.
func (ReadGrant) Name() string { return CmdGrant }

// Capability is the floor.
func (Connect) Capability() conformance.Capability { return conformance.Connection }

// Capability is events.
func (Emit) Capability() conformance.Capability { return conformance.Events }

// Capability is events.
func (Consume) Capability() conformance.Capability { return conformance.Events }

// Capability is tools.
func (Serve) Capability() conformance.Capability { return conformance.Tools }

// Capability is tools.
func (Call) Capability() conformance.Capability { return conformance.Tools }

// Capability is provisioning.
func (ReadGrant) Capability() conformance.Capability { return conformance.Provisioning }

func opt(name string) string { return "--" + name }

// Argv is the command line.
func (Connect) Argv() []string { return []string{CmdConnect} }

// Argv is the command line.
func (c Emit) Argv() []string { return []string{CmdEmit, opt(FlagFixture), c.Fixture} }

// Argv is the command line.
func (c Consume) Argv() []string {
	out := []string{CmdConsume}
	for _, p := range c.Patterns {
		out = append(out, opt(FlagPattern), p)
	}
	out = append(out, opt(FlagCount), strconv.Itoa(c.Count), opt(FlagTimeout), FormatDuration(c.Timeout))
	if c.Fail {
		out = append(out, opt(FlagFail))
	}
	if c.FailFor > 0 {
		out = append(out, opt(FlagFailFor), FormatDuration(c.FailFor))
	}
	if c.RedeliverAfter > 0 {
		out = append(out, opt(FlagRedeliverAfter), FormatDuration(c.RedeliverAfter))
	}
	return out
}

// Argv is the command line.
func (c Serve) Argv() []string {
	out := []string{CmdServe, opt(FlagTool), c.Tool, opt(FlagDuration), FormatDuration(c.Duration)}
	if c.Fail != "" {
		out = append(out, opt(FlagFail), c.Fail)
	}
	if c.Panic {
		out = append(out, opt(FlagPanic))
	}
	return out
}

// Argv is the command line.
func (c Call) Argv() []string {
	return []string{CmdCall, opt(FlagModule), c.Module, opt(FlagTool), c.Tool, opt(FlagArgs), c.Args, opt(FlagTimeout), FormatDuration(c.Timeout)}
}

// Argv is the command line.
func (c ReadGrant) Argv() []string { return []string{CmdGrant, opt(FlagFile), c.File} }

// ErrUsage is wrapped by every refusal of a command line.
var ErrUsage = errors.New("bad usage")

// ErrHelp is a command line asking for help: help, -h or --help, alone or
// after a command.
var ErrHelp = errors.New("help asked for")

// command is how one command is read from its flags.
type command struct {
	name, synopsis string
	// bind declares the flags into fs and returns what reads the command
	// once they are parsed.
	bind func(fs *flag.FlagSet) func() (Command, error)
}

// commands are the protocol's, in the order the document gives them.
var commands = []command{
	{CmdConnect, "connect", func(*flag.FlagSet) func() (Command, error) {
		return func() (Command, error) { return Connect{}, nil }
	}},
	{CmdEmit, "emit --fixture FILE", func(fs *flag.FlagSet) func() (Command, error) {
		var c Emit
		fs.StringVar(&c.Fixture, FlagFixture, "", "the event fixture")
		return func() (Command, error) {
			if c.Fixture == "" {
				return nil, errors.New("--fixture FILE is required")
			}
			return c, nil
		}
	}},
	{CmdConsume, "consume --pattern P [--pattern P ...] --count N --timeout D [--fail | --fail-for D] [--redeliver-after D]", func(fs *flag.FlagSet) func() (Command, error) {
		c := Consume{Count: 1, Timeout: 10 * time.Second}
		fs.Func(FlagPattern, "a consumed pattern (repeatable)", func(v string) error {
			if v == "" {
				return errors.New("empty")
			}
			c.Patterns = append(c.Patterns, v)
			return nil
		})
		fs.IntVar(&c.Count, FlagCount, c.Count, "stop after this many handled events")
		durationVar(fs, &c.Timeout, FlagTimeout, "stop after this long")
		fs.BoolVar(&c.Fail, FlagFail, false, "every handler fails")
		durationVar(fs, &c.FailFor, FlagFailFor, "a handler fails each event for this long after it first received it, then succeeds")
		durationVar(fs, &c.RedeliverAfter, FlagRedeliverAfter, "the wait after an event's first failed delivery, doubled after each (the SDK's default when absent)")
		return func() (Command, error) {
			switch {
			case len(c.Patterns) == 0:
				return nil, errors.New("at least one --pattern is required")
			case c.Count < 1:
				return nil, fmt.Errorf("--count must be at least 1, got %d", c.Count)
			case c.Timeout <= 0:
				return nil, errors.New("--timeout must be more than 0")
			case c.Fail && c.FailFor > 0:
				return nil, errors.New("--fail and --fail-for exclude each other")
			}
			return c, nil
		}
	}},
	{CmdServe, "serve --tool T --duration D [--fail MESSAGE | --panic]", func(fs *flag.FlagSet) func() (Command, error) {
		c := Serve{Duration: 10 * time.Second}
		fs.StringVar(&c.Tool, FlagTool, "", "the tool to serve")
		durationVar(fs, &c.Duration, FlagDuration, "how long to serve")
		fs.StringVar(&c.Fail, FlagFail, "", "fail every call with this message")
		fs.BoolVar(&c.Panic, FlagPanic, false, "panic in every call")
		return func() (Command, error) {
			switch {
			case c.Tool == "":
				return nil, errors.New("--tool T is required")
			case c.Duration <= 0:
				return nil, errors.New("--duration must be more than 0")
			case c.Fail != "" && c.Panic:
				return nil, errors.New("--fail and --panic exclude each other")
			}
			return c, nil
		}
	}},
	{CmdCall, "call --module M --tool T --args JSON --timeout D", func(fs *flag.FlagSet) func() (Command, error) {
		c := Call{Args: "{}", Timeout: 5 * time.Second}
		fs.StringVar(&c.Module, FlagModule, "", "the module serving the tool")
		fs.StringVar(&c.Tool, FlagTool, "", "the tool")
		fs.StringVar(&c.Args, FlagArgs, c.Args, "the call's arguments (JSON)")
		durationVar(fs, &c.Timeout, FlagTimeout, "how long to wait for the answer")
		return func() (Command, error) {
			switch {
			case c.Module == "" || c.Tool == "":
				return nil, errors.New("--module M and --tool T are required")
			case !json.Valid([]byte(c.Args)):
				return nil, fmt.Errorf("--args must be JSON, got %q", c.Args)
			case c.Timeout <= 0:
				return nil, errors.New("--timeout must be more than 0")
			}
			return c, nil
		}
	}},
	{CmdGrant, "grant --file FILE", func(fs *flag.FlagSet) func() (Command, error) {
		var c ReadGrant
		fs.StringVar(&c.File, FlagFile, "", "the contributions file")
		return func() (Command, error) {
			if c.File == "" {
				return nil, errors.New("--file FILE is required")
			}
			return c, nil
		}
	}},
}

// Commands lists every command's word, in the order the document gives
// them.
func Commands() []string {
	out := make([]string, len(commands))
	for i, c := range commands {
		out[i] = c.name
	}
	return out
}

// Synopsis is a command's usage line; "" for an unknown word.
func Synopsis(name string) string {
	for _, c := range commands {
		if c.name == name {
			return c.synopsis
		}
	}
	return ""
}

// Usage is the usage text of a driver called program.
func Usage(program string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s COMMAND [FLAGS] — a conformance driver (docs/conformance.md)\n\nCommands:\n", program)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n", c.synopsis)
	}
	b.WriteString("\nA duration D is a whole number with its unit, ms or s: 500ms, 90s.\n")
	b.WriteString("The module's credential is the file $MESH_CREDENTIAL names.\n")
	return b.String()
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// ParseCommand reads a driver's command line (after its own name). It
// returns ErrHelp when help was asked for, and an error wrapping ErrUsage
// saying what is wrong otherwise.
func ParseCommand(args []string) (Command, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: a command is required", ErrUsage)
	}
	if isHelp(args[0]) {
		return nil, ErrHelp
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		read := c.bind(fs)
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ErrHelp
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrUsage, c.name, err)
		}
		if fs.NArg() > 0 {
			return nil, fmt.Errorf("%w: %s: unexpected argument %q", ErrUsage, c.name, fs.Arg(0))
		}
		cmd, err := read()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUsage, c.name, err)
		}
		return cmd, nil
	}
	return nil, fmt.Errorf("%w: unknown command %q (known: %s)", ErrUsage, args[0], strings.Join(Commands(), ", "))
}

// durationRE is the protocol's duration: a whole number and its unit.
var durationRE = regexp.MustCompile(`^([0-9]{1,9})(ms|s)$`)

// ParseDuration reads a duration as the protocol spells it: a whole
// number of milliseconds or seconds, "500ms" or "90s", so that a driver in
// any language reads it without Go's duration syntax.
func ParseDuration(s string) (time.Duration, error) {
	m := durationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("duration %q: want a whole number with ms or s, e.g. 500ms or 90s", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if m[2] == "s" {
		return time.Duration(n) * time.Second, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// FormatDuration spells d as the protocol does: in seconds when it is a
// whole number of them, else in milliseconds (rounded).
func FormatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d.Round(time.Millisecond)/time.Millisecond), 10) + "ms"
}

func durationVar(fs *flag.FlagSet, d *time.Duration, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		got, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*d = got
		return nil
	})
}
