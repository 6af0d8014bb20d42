package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
		if slices.Contains(os.Args[1:], "-t") {
			os.Exit(fakeCheck(os.Getenv(envState), os.Args[1:]))
		}
		os.Exit(fakeServer(mode, os.Getenv(envState), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// Markers a test puts in a configuration for the fake server's check.
const (
	markRefuse  = `"fake":"refuse",`  // the server refuses it
	markRestart = `"fake":"restart",` // reloading to it needs a restart
)

// fakeCheck plays `nats-server -c <file> -t [--test_reload <file>]`: it
// judges the file it would load by the markers, with nats-server's exit
// statuses, and appends "check" to state when there is one.
func fakeCheck(state string, args []string) int {
	if state != "" {
		if f, err := os.OpenFile(state, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.WriteString("check\n")
			_ = f.Close()
		}
	}
	judge := ""
	for i, a := range args[:len(args)-1] {
		if a == "-c" && judge == "" || a == "--test_reload" {
			judge = args[i+1]
		}
	}
	b, err := os.ReadFile(judge)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "nats-server: %v\n", err)
		return 1
	case strings.Contains(string(b), markRefuse):
		fmt.Fprintf(os.Stderr, "nats-server: %s: fake refusal\n", judge)
		return 1
	case strings.Contains(string(b), markRestart) && slices.Contains(args, "--test_reload"):
		fmt.Fprintf(os.Stderr, "nats-server: config reload not supported for Fake\n")
		return 3
	}
	return 0
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

// conf is a whole configuration with one account and one user; extra
// (members ending in a comma) goes before the accounts.
func conf(port int, extra string) string {
	return fmt.Sprintf(`{"listen":"127.0.0.1:%d",%s"accounts":{"A":{"users":[{"user":"u","password":"p"}]}}}`, port, extra)
}

// syncBuffer is a bytes.Buffer the test may read while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// entrypoint is one running mesh-nats with the fake server as its child.
type entrypoint struct {
	cmd    *exec.Cmd
	state  string
	config string
	runDir string
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

func startEntrypoint(t *testing.T, bin, mode string) *entrypoint {
	t.Helper()
	return startEntrypointOn(t, bin, mode, conf(4222, ""))
}

// startEntrypointOn starts mesh-nats on a configuration file holding
// content.
func startEntrypointOn(t *testing.T, bin, mode, content string) *entrypoint {
	t.Helper()
	dir := t.TempDir()
	e := &entrypoint{
		state:  filepath.Join(dir, "state"),
		config: filepath.Join(dir, "nats.conf"),
		runDir: filepath.Join(dir, "run"),
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	if err := os.WriteFile(e.config, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cmd = exec.Command(bin, "--config", e.config, "--server", os.Args[0], "--poll", "20ms", "--run-dir", e.runDir)
	e.cmd.Env = append(os.Environ(), envChild+"="+mode, envState+"="+e.state)
	e.cmd.Stderr = e.stderr
	// A group of its own, so that a failed test ends the fake server too
	// rather than waiting for it to give up.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.err = e.cmd.Wait(); close(e.exited) }()
	t.Cleanup(func() {
		select {
		case <-e.exited:
		default:
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
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

// applied is the configuration the server was last given.
func (e *entrypoint) applied(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.runDir, AppliedFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logged counts mesh-nats's log lines with message msg.
func (e *entrypoint) logged(msg string) int {
	return strings.Count(e.stderr.String(), `"msg":"`+msg+`"`)
}

func (e *entrypoint) write(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(e.config, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
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
			if want := "args -c " + filepath.Join(e.runDir, AppliedFile); !slices.Contains(e.lines(), want) {
				t.Fatalf("expected the child to get -c <the checked copy>, %q, got %q", want, e.lines())
			}
			if e.count("check") != 1 || e.applied(t) != conf(4222, "") {
				t.Fatalf("expected the server to have checked the configuration once before starting on a copy of it, got %q, copy %q", e.lines(), e.applied(t))
			}

			// A content change in place is one SIGHUP.
			e.write(t, conf(4223, ""))
			eventually(t, 5*time.Second, "one SIGHUP after an edit", func() bool { return e.count("hup") == 1 })
			if e.applied(t) != conf(4223, "") {
				t.Fatalf("expected the server's copy to hold the new content, got %q", e.applied(t))
			}

			// An atomic replacement, as the controller writes it, is another.
			tmp := e.config + ".tmp"
			if err := os.WriteFile(tmp, []byte(conf(4224, "")), 0o644); err != nil {
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
		dir := t.TempDir()
		config := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(config, []byte(conf(4222, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config", config, "--run-dir", filepath.Join(dir, "run"),
			"--server", filepath.Join(dir, "no-such-server"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("expected exit status 1, got %v", err)
		}
		if !strings.Contains(string(out), "configuration not checked at start") {
			t.Fatalf("expected mesh-nats to say it could not check the configuration, got:\n%s", out)
		}
	})
}

// TestRefusesToStart: a configuration that is torn, open, refused by the
// server or missing at start means no server at all, and a line saying why.
func TestRefusesToStart(t *testing.T) {
	bin := buildEntrypoint(t)
	whole := conf(4222, "")
	for _, tc := range []struct {
		name, content, says string
		checked             int // how many times the server's check ran
	}{
		{"torn", whole[:len(whole)/2], "not one whole JSON document", 0},
		{"no users", `{"listen":"127.0.0.1:4222","accounts":{"A":{"jetstream":"enabled"}}}`, "no account has a user", 0},
		{"anonymous user", conf(4222, `"no_auth_user":"u",`), "no_auth_user", 0},
		{"refused by the server", conf(4222, markRefuse), "fake refusal", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEntrypointOn(t, bin, "serve", tc.content)
			if got := e.waitExit(t, 10*time.Second); got != 1 {
				t.Fatalf("expected exit status 1, got %d", got)
			}
			if e.count("ready") != 0 || e.count("check") != tc.checked {
				t.Fatalf("expected no server started and %d checks, got %q", tc.checked, e.lines())
			}
			if e.logged("configuration refused at start; not starting the server") != 1 ||
				!strings.Contains(e.stderr.String(), tc.says) {
				t.Fatalf("expected one line refusing the configuration and saying %q, got:\n%s", tc.says, e.stderr)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(bin, "--config", filepath.Join(dir, "nats.conf"), "--run-dir", filepath.Join(dir, "run"),
			"--server", os.Args[0])
		cmd.Env = append(os.Environ(), envChild+"=serve", envState+"="+filepath.Join(dir, "state"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "file unreadable") {
			t.Fatalf("expected exit status 1 and the file named unreadable, got %v:\n%s", err, out)
		}
	})
}

// TestKeepsTheLastGoodConfiguration: torn, open, server-refused and
// not-reloadable contents written in place are refused, each said once,
// the server keeps what it has (no SIGHUP, its copy unchanged), and a good
// content after them is applied.
func TestKeepsTheLastGoodConfiguration(t *testing.T) {
	bin := buildEntrypoint(t)
	e := startEntrypoint(t, bin, "serve")
	eventually(t, 10*time.Second, "child ready", func() bool { return e.count("ready") == 1 })
	good := e.applied(t)
	const refused = "configuration refused; the server keeps the last good one"

	next := conf(4223, "")
	cases := []struct{ name, content, says string }{
		{"torn", next[:len(next)-20], "not one whole JSON document: it ends in the middle of a value"},
		{"no users", `{"listen":"127.0.0.1:4222","accounts":{"A":{"users":[]}}}`, "no account has a user"},
		{"open to anonymous clients", conf(4222, `"no_auth_user":"u",`), "no_auth_user"},
		{"refused by the server", conf(4222, markRefuse), "fake refusal"},
		{"not reloadable", conf(4222, markRestart), "config reload not supported"},
	}
	for _, tc := range cases {
		e.write(t, tc.content)
		// The refusal of the whole content is the proof that a poll has
		// looked at it. A poll may also catch the file mid-write (empty,
		// or cut short) and refuse that: a content of its own.
		eventually(t, 5*time.Second, tc.name+": refusal said", func() bool { return len(e.refusalsOf(tc.content)) == 1 })
		if said := e.refusalsOf(tc.content)[0]; !strings.Contains(said, tc.says) {
			t.Fatalf("%s: expected the refusal to say %q, got:\n%s", tc.name, tc.says, said)
		}
		if e.count("hup") != 0 || e.applied(t) != good {
			t.Fatalf("%s: expected no reload and the server's copy unchanged, got %d SIGHUPs, copy %q", tc.name, e.count("hup"), e.applied(t))
		}
	}
	// Said once per content: a further poll of the same refused content
	// is silent. Wait for the watcher to look again by writing a content
	// with a refusal of its own, then count.
	e.write(t, "{")
	eventually(t, 5*time.Second, "the next refusal", func() bool { return len(e.refusalsOf("{")) == 1 })

	e.write(t, next)
	eventually(t, 5*time.Second, "one SIGHUP for the whole file", func() bool { return e.count("hup") == 1 })
	if e.applied(t) != next {
		t.Fatalf("expected the server's copy to hold the whole file, got %q", e.applied(t))
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.waitExit(t, 10*time.Second); got != 7 {
		t.Fatalf("expected mesh-nats to exit with the child's 7, got %d", got)
	}
	if e.count("hup") != 1 {
		t.Fatalf("expected exactly one SIGHUP, got %d:\n%s", e.count("hup"), e.stderr)
	}
	for _, tc := range cases {
		if n := len(e.refusalsOf(tc.content)); n != 1 {
			t.Fatalf("%s: expected its refusal said once, got %d:\n%s", tc.name, n, e.stderr)
		}
	}
}

// refusalsOf are the lines refusing content, known by its hash as the
// entrypoint logs it (the first 16 hex digits of its sha256).
func (e *entrypoint) refusalsOf(content string) []string {
	sum := sha256.Sum256([]byte(content))
	hash := `"hash":"` + hex.EncodeToString(sum[:])[:16] + `"`
	var out []string
	for _, l := range strings.Split(e.stderr.String(), "\n") {
		if strings.Contains(l, "configuration refused") && strings.Contains(l, hash) {
			out = append(out, l)
		}
	}
	return out
}

// TestHUPRechecksARefusedFile: an operator's SIGHUP is forwarded (the
// server reloads what it has) and makes the entrypoint offer a refused
// content to the server's check again, without the file changing.
func TestHUPRechecksARefusedFile(t *testing.T) {
	bin := buildEntrypoint(t)
	e := startEntrypoint(t, bin, "serve")
	eventually(t, 10*time.Second, "child ready", func() bool { return e.count("ready") == 1 })
	e.write(t, conf(4222, markRefuse))
	eventually(t, 5*time.Second, "refusal", func() bool { return e.count("check") == 2 })
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the HUP forwarded and the file checked again", func() bool {
		return e.count("hup") == 1 && e.count("check") == 3
	})
	if e.applied(t) != conf(4222, "") {
		t.Fatalf("expected the server's copy unchanged, got %q", e.applied(t))
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.waitExit(t, 10*time.Second); got != 7 {
		t.Fatalf("expected mesh-nats to exit with the child's 7, got %d", got)
	}
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
		o.runDir != "/run/mesh-nats" ||
		len(o.childArgs) != 1 || o.childArgs[0] != "-DV" {
		t.Fatalf("unexpected options %+v", o)
	}
}
