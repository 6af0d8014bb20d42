// Command mesh-probe observes the system from the network its container
// is attached to: one HTTP GET or one TCP connect, one JSON line on stdout
// ({"ok":bool,"status":int,"body":string,"error":string}, and for tcp
// "connect_ms": the handshake's time), exit 0 whether or
// not the target answered. Exit 2 is reserved for bad usage, so a caller can
// tell "refused from here" (ok false) from "the probe was misused".
//
//	mesh-probe [--timeout 3s] http URL
//	mesh-probe [--timeout 3s] tcp HOST:PORT
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its outside world passed in; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mesh-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up on the target after this `duration`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  mesh-probe [flags] http URL       GET URL; ok when any HTTP response arrives
  mesh-probe [flags] tcp HOST:PORT  connect; ok when the connection is accepted

Prints one JSON line {"ok":bool,"status":int,"body":string,"error":string}
(a tcp probe adds "connect_ms", the handshake's time) and exits 0 whether or not the target answered; 2 on bad usage.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 || *timeout <= 0 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	kind, target := fs.Arg(0), fs.Arg(1)
	if err := checkTarget(kind, target); err != nil {
		fmt.Fprintf(stderr, "mesh-probe: %v\n", err)
		return 2
	}
	var res Result
	if kind == "http" {
		res = probeHTTP(ctx, target)
	} else {
		res = probeTCP(ctx, target)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(stderr, "mesh-probe: write result: %v\n", err)
		return 1
	}
	return 0
}
