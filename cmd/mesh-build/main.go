// Command mesh-build is the build path's front door. For now it has the
// check every build runs first: a module whose manifest uses a capability
// its language's SDK does not claim (conformance/registry.yaml) is
// refused, with the reason, before anything is compiled (design 19, "A
// partial SDK is legitimate").
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `mesh-build checks modules before they are built.

Usage:
  mesh-build check --mesh FILE [--module NAME]

check refuses every module of the description (or only NAME) that uses a
capability its language's SDK does not implement, naming the module, the
capability and the manifest fields that need it.

Exit status: 0 every module checked can be built (or help: help, -h,
--help, check --help); 1 a module is refused or the description is
invalid; 2 bad usage.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] != "check" {
		fmt.Fprintf(stderr, "mesh-build: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	fs.Usage = func() {
		fmt.Fprintf(&flagOut, "%s\nFlags of check:\n", usage)
		fs.PrintDefaults()
	}
	meshFile := fs.String("mesh", "", "the mesh description")
	module := fs.String("module", "", "check only this module")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = stdout.Write(flagOut.Bytes())
			return 0
		}
		_, _ = stderr.Write(flagOut.Bytes())
		return 2
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
