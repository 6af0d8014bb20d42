package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PIDFile, in the run directory, holds the pid of the running nats-server
// while it runs: what `mesh-nats signal` reads to reach the server itself
// rather than the entrypoint, which is the container's first process.
const PIDFile = "server.pid"

// signals are the ones `mesh-nats signal` sends, by name.
var signals = map[string]syscall.Signal{
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
	"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

// writePID records the server's pid for `mesh-nats signal`: written to a
// temporary file and renamed, so a reader never sees half a number.
func writePID(dir string, pid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+PIDFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, PIDFile))
}

// runSignal is `mesh-nats signal [--run-dir D] NAME`: it sends the signal
// NAME to the nats-server the entrypoint runs, found by its pid file. It
// exists so that a fault can reach the server process itself from outside
// the container (`docker exec <nats> /mesh-nats signal KILL`): the image
// is FROM scratch, with no kill(1), and a signal to the container goes to
// the entrypoint, which forwards it as a request rather than a crash.
func runSignal(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mesh-nats signal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runDir := fs.String("run-dir", "/run/mesh-nats", "the entrypoint's run `directory`, where "+PIDFile+" is")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mesh-nats signal [--run-dir D] %s\n\nSends the signal to the running nats-server (not to the entrypoint).\n\nFlags:\n",
			strings.Join(signalNames(), "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "mesh-nats signal: want one signal name (%s), got %d arguments\n", strings.Join(signalNames(), ", "), fs.NArg())
		return 2
	}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(fs.Arg(0)), "SIG")]
	if !ok {
		fmt.Fprintf(stderr, "mesh-nats signal: unknown signal %q (want one of %s)\n", fs.Arg(0), strings.Join(signalNames(), ", "))
		return 2
	}
	path := filepath.Join(*runDir, PIDFile)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "mesh-nats signal: no server running (read %s: %v)\n", path, err)
		return 1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		fmt.Fprintf(stderr, "mesh-nats signal: %s holds %q, not a server's pid\n", path, strings.TrimSpace(string(data)))
		return 1
	}
	if err := syscall.Kill(pid, sig); err != nil {
		fmt.Fprintf(stderr, "mesh-nats signal: send %s to pid %d: %v\n", sig, pid, err)
		return 1
	}
	fmt.Fprintf(stdout, "sent %s to nats-server (pid %d)\n", sig, pid)
	return 0
}

func signalNames() []string {
	return []string{"KILL", "TERM", "INT", "HUP", "STOP", "CONT", "USR1", "USR2"}
}
