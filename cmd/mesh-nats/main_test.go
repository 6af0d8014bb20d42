package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the child: run by mesh-nats with these
// variables set, it plays a nats-server that records what it receives.
const (
	envChild = "MESH_NATS_TEST_CHILD" // what the child does: "serve", "exit3", "selfkill"
	envState = "MESH_NATS_TEST_STATE" // file the child appends one line per event to
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(fakeServer(mode, os.Getenv(envState), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeServer appends "args …", "ready", then one line per signal to state.
// It exits 7 on SIGTERM and 8 on SIGINT so the test can tell the status
// was propagated rather than invented.
func fakeServer(mode, state string, args []string) int {
	f, err := os.OpenFile(state, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 99
	}
	defer f.Close()
	note := func(line string) { _, _ = f.WriteString(line + "\n") }
	note("args " + strings.Join(args, " "))
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	note("ready")
	switch mode {
	case "exit3":
		return 3
	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	// Bounded, so a broken test never leaves it behind.
	limit := time.After(time.Minute)
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGHUP:
				note("hup")
			case syscall.SIGTERM:
				note("term")
				return 7
			case syscall.SIGINT:
				note("int")
				return 8
			}
		case <-limit:
			return 98
		}
	}
}

// buildEntrypoint compiles the real mesh-nats binary once per test run.
func buildEntrypoint(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mesh-nats")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// go test puts $GOROOT/bin first on PATH, so "go" is the toolchain
	// that is running this test.
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build mesh-nats: %v\n%s", err, out)
	}
	return bin
}

// entrypoint is one running mesh-nats with the fake server as its child.
type entrypoint struct {
	cmd    *exec.Cmd
	state  string
	config string
	stderr *bytes.Buffer
	exited chan struct{}
	err    error
}

func startEntrypoint(t *testing.T, bin, mode string) *entrypoint {
	t.Helper()
	dir := t.TempDir()
	e := &entrypoint{
		state:  filepath.Join(dir, "state"),
		config: filepath.Join(dir, "nats.conf"),
		stderr: &bytes.Buffer{},
		exited: make(chan struct{}),
	}
	if err := os.WriteFile(e.config, []byte(`{"listen":"127.0.0.1:4222"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cmd = exec.Command(bin, "--config", e.config, "--server", os.Args[0], "--poll", "20ms")
	e.cmd.Env = append(os.Environ(), envChild+"="+mode, envState+"="+e.state)
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.err = e.cmd.Wait(); close(e.exited) }()
	t.Cleanup(func() {
		select {
		case <-e.exited:
		default:
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
		if t.Failed() {
			t.Logf("mesh-nats stderr:\n%s", e.stderr)
		}
	})
	return e
}

// lines reads the child's state file; a missing file is no lines yet.
func (e *entrypoint) lines() []string {
	b, err := os.ReadFile(e.state)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (e *entrypoint) count(line string) int {
	n := 0
	for _, l := range e.lines() {
		if l == line {
			n++
		}
	}
	return n
}

// waitExit waits for mesh-nats to exit and returns its exit status.
func (e *entrypoint) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-e.exited:
	case <-time.After(within):
		t.Fatalf("mesh-nats still running after %v", within)
	}
	var ee *exec.ExitError
	if e.err != nil && !errors.As(e.err, &ee) {
		t.Fatalf("wait mesh-nats: %v", e.err)
	}
	return e.cmd.ProcessState.ExitCode()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEntrypoint(t *testing.T) {
	bin := buildEntrypoint(t)

	for _, tc := range []struct {
		sig  syscall.Signal
		want int
		line string
	}{{syscall.SIGTERM, 7, "term"}, {syscall.SIGINT, 8, "int"}} {
		t.Run("reloads and forwards "+tc.line, func(t *testing.T) {
			e := startEntrypoint(t, bin, "serve")
			eventually(t, 10*time.Second, "child ready", func() bool { return e.count("ready") == 1 })
			if got := e.lines()[0]; got != "args -c "+e.config {
				t.Fatalf("expected the child to get -c <config>, got %q", got)
			}

			// A content change in place is one SIGHUP.
			if err := os.WriteFile(e.config, []byte(`{"listen":"127.0.0.1:4223"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "one SIGHUP after an edit", func() bool { return e.count("hup") == 1 })

			// An atomic replacement, as the controller writes it, is another.
			tmp := e.config + ".tmp"
			if err := os.WriteFile(tmp, []byte(`{"listen":"127.0.0.1:4224"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, e.config); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "second SIGHUP after a rename", func() bool { return e.count("hup") == 2 })

			if err := e.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if got := e.waitExit(t, 10*time.Second); got != tc.want {
				t.Fatalf("expected mesh-nats to exit with the child's %d, got %d", tc.want, got)
			}
			if e.count(tc.line) != 1 {
				t.Fatalf("expected the child to receive %v, got lines %q", tc.sig, e.lines())
			}
			if n := e.count("hup"); n != 2 {
				t.Fatalf("expected exactly 2 SIGHUPs in all, got %d", n)
			}
		})
	}

	t.Run("exits with the child's status", func(t *testing.T) {
		e := startEntrypoint(t, bin, "exit3")
		if got := e.waitExit(t, 10*time.Second); got != 3 {
			t.Fatalf("expected exit status 3, got %d", got)
		}
	})

	t.Run("child killed by a signal", func(t *testing.T) {
		e := startEntrypoint(t, bin, "selfkill")
		if got, want := e.waitExit(t, 10*time.Second), 128+int(syscall.SIGKILL); got != want {
			t.Fatalf("expected exit status %d, got %d", want, got)
		}
	})

	t.Run("missing server binary", func(t *testing.T) {
		cmd := exec.Command(bin, "--config", filepath.Join(t.TempDir(), "nats.conf"),
			"--server", filepath.Join(t.TempDir(), "no-such-server"))
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("expected exit status 1, got %v", err)
		}
	})
}

func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	for _, help := range []string{"-h", "--help"} {
		stderr.Reset()
		if got := run([]string{help}, &stderr, &stderr); got != 0 {
			t.Fatalf("%s: expected status 0, got %d", help, got)
		}
		if !strings.Contains(stderr.String(), "-poll duration") {
			t.Fatalf("%s: expected the flags in the help, got:\n%s", help, stderr.String())
		}
	}
	for _, args := range [][]string{{"--bogus"}, {"--poll", "0s"}} {
		stderr.Reset()
		if got := run(args, &stderr, &stderr); got != 2 {
			t.Fatalf("%q: expected status 2, got %d (%s)", args, got, stderr.String())
		}
	}
	o, err := parseFlags([]string{"--poll=250ms", "--", "-DV"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.poll != 250*time.Millisecond || o.config != "/etc/nats/nats.conf" || o.server != "/nats-server" ||
		len(o.childArgs) != 1 || o.childArgs[0] != "-DV" {
		t.Fatalf("unexpected options %+v", o)
	}
}
