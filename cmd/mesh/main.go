// Command mesh is a person's client of the mesh (design 25 §7): it makes
// the person's sealing key, opens the credential the controller sealed to
// it, lists the tools the person may call by asking the mesh's catalogue,
// calls one, and serves them all to an agent over MCP (stdio). It speaks
// the bus through the SDK's contract, as a module's tool calls do
// (package mesh/client).
//
//	mesh key new --out FILE
//	mesh credential open --key FILE [--out FILE] SEALED|-
//	mesh tools [--json] [--credential FILE] [--timeout D]
//	mesh call [--credential FILE] [--timeout D] MODULE.TOOL [JSON|-]
//	mesh mcp [--credential FILE] [--timeout D] [--refresh D]
//
// key new writes a new sealing key to FILE (0600; an existing file is
// never overwritten) and prints its public half, which
// mesh-controller person issue --key takes. credential open opens the
// sealed credential person issue printed (a file, or - for stdin) with
// that key and writes the credential document to --out (0600, replaced
// atomically) or stdout.
//
// tools, call and mcp connect with the person's credential: --credential,
// else the file $MESH_CREDENTIAL names. tools prints one line per tool
// the person may call (or, with --json, the catalogue document of them);
// call sends JSON (default {}; - reads it from stdin) and prints the
// tool's answer; mcp serves the tools over stdio until the agent closes
// stdin, asking the catalogue again on every tools/list and every
// --refresh (default 30s; 0 never), so a push's tools reach the agent.
// --timeout (default 10s) bounds connecting and each call.
//
// Stdout carries only what a command prints, and for mcp only the
// protocol; logs are JSON lines on stderr, and a failure is one line
// there saying what happened. help, -h or --help (alone, or with or
// after a command) prints the usage on stdout. Exit status:
//
//	0 done (or help)
//	1 failed otherwise (the bus unreachable, a key that does not open the credential, …)
//	2 bad usage or bad input (a flag, a malformed tool name, arguments that are not a JSON object, a file that is not what it should be)
//	3 the tool failed (its handler returned an error)
//	4 nobody serves the tool
//	5 the tool did not answer within --timeout
//	6 the bus refused the call: the person has no grant for the tool
//	7 the bus refused the person's credential: it was revoked, or never issued
//	8 the mesh's catalogue lists no such tool
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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/printable"
)

// Exit statuses of this program's own; a client failure exits with its
// kind's (client.Kind.Exit).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is what a command runs with: the process's streams, as run was
// given them.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand: its usage line, its flags, how many
// positional arguments it takes, and what it does.
type command struct {
	name     string
	usage    string
	flags    func(fs *flag.FlagSet, o *opts)
	min, max int
	do       func(ctx context.Context, o *opts, e env) error
}

// opts is what a command's flags and arguments said.
type opts struct {
	args    []string
	conn    connFlags
	out     string
	key     string
	json    bool
	refresh time.Duration
}

// commands lists every command, in the order the usage shows them.
func commands() []command {
	return []command{keyNewCmd(), credentialOpenCmd(), toolsCmd(), callCmd(), mcpCmd()}
}

// usage is every command's usage line.
func usage() string {
	var lines []string
	for i, c := range commands() {
		prefix := "       "
		if i == 0 {
			prefix = "usage: "
		}
		lines = append(lines, prefix+c.usage)
	}
	return strings.Join(lines, "\n")
}

// isHelp reports whether a word asks for help.
func isHelp(s string) bool {
	switch s {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// run is the whole program but for the process: testable in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage())
		return exitUsage
	}
	if isHelp(args[0]) {
		if len(args) > 1 {
			if c, _, ok := find(args[1:]); ok {
				// "mesh help call" is "mesh call --help": the flags too.
				return run(ctx, append(strings.Fields(c.name), "--help"), stdin, stdout, stderr)
			}
		}
		fmt.Fprintln(stdout, usage())
		return exitOK
	}
	c, rest, ok := find(args)
	if !ok {
		return unknown(args, e)
	}
	o := &opts{}
	fs := flag.NewFlagSet("mesh "+c.name, flag.ContinueOnError)
	if c.flags != nil {
		c.flags(fs, o)
	}
	pos, code, ok := parse(fs, c, rest, e)
	if !ok {
		return code
	}
	if len(pos) < c.min || len(pos) > c.max {
		fmt.Fprintf(stderr, "mesh %s: %s\nusage: %s\n", c.name, wrongArgs(c, pos), c.usage)
		return exitUsage
	}
	o.args = pos
	if err := c.do(ctx, o, e); err != nil {
		// A failure may carry a tool's own words: escaped, as every
		// other principal's bytes this program prints (issue 18).
		fmt.Fprintf(stderr, "mesh %s: %s\n", c.name, printable.Line(err.Error()))
		return exitCode(err)
	}
	return exitOK
}

// find is the command args begin with ("key new", "tools", …) and the
// arguments after its name.
func find(args []string) (command, []string, bool) {
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, args[len(words):], true
		}
	}
	return command{}, nil, false
}

// unknown answers a command it does not know: help for a command of two
// words asked as "mesh key help", else a usage error.
func unknown(args []string, e env) int {
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(words) == 2 && args[0] == words[0] {
			if len(args) > 1 && isHelp(args[1]) {
				fmt.Fprintln(e.stdout, "usage: "+c.usage)
				return exitOK
			}
			fmt.Fprintf(e.stderr, "mesh %s: the verb is %s\nusage: %s\n", words[0], words[1], c.usage)
			return exitUsage
		}
	}
	fmt.Fprintf(e.stderr, "mesh: unknown command %q\n%s\n", args[0], usage())
	return exitUsage
}

// wrongArgs says what is wrong with a command's positional arguments.
func wrongArgs(c command, pos []string) string {
	switch {
	case c.max == 0:
		return fmt.Sprintf("unexpected arguments %q", pos)
	case len(pos) < c.min:
		return "missing arguments"
	}
	return fmt.Sprintf("too many arguments: %q", pos[c.max:])
}

// usageError is bad input found by a command after its flags parsed: a
// file that is not what it should be. It exits exitUsage.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func badInput(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCode is the exit status for a command's error.
func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return client.Exit(err)
	}
	return exitFailed
}

// logger is the program's log, JSON lines on stderr: at info for a
// server (mesh mcp), at warn for a command a person runs and reads.
func logger(stderr io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
}
