package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/sdk"
)

// parse parses a command's flags, which may come before, between or
// after its positional arguments ("--" ends them). Asked for help (-h,
// --help, or help as the first argument) it prints the command's usage and
// flags on stdout and the command ends with exitOK; a bad flag is
// reported on stderr with the usage, and ends it with exitUsage. ok is
// true when the command goes on, with the positional arguments.
func parse(fs *flag.FlagSet, c command, args []string, e env) (pos []string, code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() {
		fmt.Fprintf(&out, "usage: %s\n", c.usage)
		if hasFlags(fs) {
			fmt.Fprintf(&out, "\nFlags of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	if len(args) > 0 && args[0] == "help" {
		fs.Usage()
		_, _ = e.stdout.Write(out.Bytes())
		return nil, exitOK, false
	}
	pos, err := interspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = e.stdout.Write(out.Bytes())
		return nil, exitOK, false
	case err != nil:
		_, _ = e.stderr.Write(out.Bytes())
		return nil, exitUsage, false
	}
	return pos, 0, true
}

// interspersed parses flags wherever they are among the positional
// arguments, which it returns in order.
func interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// connFlags are the flags of a command that connects as the person.
type connFlags struct {
	credential string
	timeout    time.Duration
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.credential, "credential", "", "the person's credential document (mesh credential open wrote it); default the file $MESH_CREDENTIAL names")
	fs.DurationVar(&c.timeout, "timeout", sdk.DefaultTimeout, "how long connecting, and each call, may take")
}

// open connects as the person the credential names.
func (c connFlags) open(ctx context.Context, log *slog.Logger) (*client.Client, error) {
	if c.timeout <= 0 {
		return nil, badInput("--timeout %s: want a positive duration", c.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return client.Open(ctx, c.credential, client.WithLogger(log), client.WithTimeout(c.timeout))
}
