package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/client/mcpserve"
	"github.com/meshbus/mesh/mesh/printable"
	"github.com/meshbus/mesh/mesh/wire"
)

func toolsCmd() command {
	return command{
		name:  "tools",
		usage: "mesh tools [--json] [--credential FILE] [--timeout D]",
		flags: func(fs *flag.FlagSet, o *opts) {
			o.conn.register(fs)
			fs.BoolVar(&o.json, "json", false, "print the catalogue document of the tools (wire.Catalogue) instead of a line per tool")
		},
		do: tools,
	}
}

// tools prints the tools the person may call.
func tools(ctx context.Context, o *opts, e env) error {
	c, err := o.conn.open(ctx, logger(e.stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.Tools(ctx)
	if err != nil {
		return err
	}
	if o.json {
		_, err := fmt.Fprintf(e.stdout, "%s\n", printable.JSON(wire.Catalogue{Tools: list}.Marshal()))
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, t := range list {
		fmt.Fprintf(w, "%s\t%s\n", printable.Line(t.Name()), oneLine(t.Description))
	}
	return w.Flush()
}

// oneLine is a description fit for one line of a listing. The
// description is the module's, and a terminal acts on control sequences
// and bidi overrides printed raw: escaped (issue 18).
func oneLine(s string) string { return printable.Line(strings.Join(strings.Fields(s), " ")) }

func callCmd() command {
	return command{
		name:  "call",
		usage: "mesh call [--credential FILE] [--timeout D] MODULE.TOOL [JSON|-]",
		flags: func(fs *flag.FlagSet, o *opts) { o.conn.register(fs) },
		min:   1, max: 2,
		do: call,
	}
}

// call calls one tool and prints its answer.
func call(ctx context.Context, o *opts, e env) error {
	args := []byte("{}")
	if len(o.args) == 2 {
		args = []byte(o.args[1])
		if o.args[1] == "-" {
			var err error
			if args, err = readSmall("-", e.stdin); err != nil {
				return err
			}
		}
	}
	// Bad input is bad input whether or not the bus answers: checked
	// before connecting (issue 18).
	args, err := client.CheckCall(o.args[0], args)
	if err != nil {
		return err
	}
	c, err := o.conn.open(ctx, logger(e.stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	out, err := c.Call(ctx, o.args[0], args)
	if err != nil {
		return err
	}
	// The answer is the tool's bytes: a JSON answer stays the same JSON
	// with what a terminal acts on escaped, anything else is escaped as
	// text (issue 18).
	if _, err := e.stdout.Write(printable.JSON(out)); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout)
	return err
}

func mcpCmd() command {
	return command{
		name:  "mcp",
		usage: "mesh mcp [--credential FILE] [--timeout D] [--refresh D]",
		flags: func(fs *flag.FlagSet, o *opts) {
			o.conn.register(fs)
			fs.DurationVar(&o.refresh, "refresh", mcpserve.DefaultRefresh, "how often the catalogue is asked again between listings, so a push's tools reach the agent; 0 never")
		},
		do: serveMCP,
	}
}

// serveMCP serves the person's tools over stdio until the agent closes
// stdin (or a signal ends ctx). Nothing but the protocol is written to
// stdout.
func serveMCP(ctx context.Context, o *opts, e env) error {
	refresh := o.refresh
	if refresh < 0 {
		return badInput("--refresh %s: want 0 (never) or a positive duration", refresh)
	}
	if refresh == 0 {
		refresh = -1 // mcpserve's never
	}
	log := logger(e.stderr, slog.LevelInfo).With("cmd", "mcp")
	c, err := o.conn.open(ctx, log)
	if err != nil {
		return err
	}
	defer c.Close()
	s := mcpserve.New(c, mcpserve.Options{Logger: log, Refresh: refresh, Person: c.Person(), Version: version()})
	log.Info("serving the person's tools over stdio", "person", c.Person())
	err = s.Run(ctx, transport(e))
	if ctx.Err() != nil || err == nil || errors.Is(err, io.EOF) {
		return nil // the agent closed stdin, or a signal stopped it
	}
	return fmt.Errorf("serve MCP: %w", err)
}

// transport is MCP over the program's stdin and stdout: the process's
// own (mcp.StdioTransport), or the streams a test gave run.
func transport(e env) mcp.Transport {
	if e.stdin == os.Stdin && e.stdout == os.Stdout {
		return &mcp.StdioTransport{}
	}
	return &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// version is the module's version as the build recorded it.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
