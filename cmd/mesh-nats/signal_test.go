package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalReachesTheServerItself: `mesh-nats signal KILL` kills the
// child, not the entrypoint; the entrypoint then exits with 128+9, as the
// container would stop, and leaves no pid file behind.
func TestSignalReachesTheServerItself(t *testing.T) {
	bin := buildEntrypoint(t)
	e := startEntrypoint(t, bin, "serve")
	eventually(t, 10*time.Second, "child ready", func() bool { return e.count("ready") == 1 })
	pidFile := filepath.Join(e.runDir, PIDFile)
	eventually(t, 5*time.Second, "the pid file written", func() bool { _, err := os.Stat(pidFile); return err == nil })

	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "signal", "--run-dir", e.runDir, "KILL")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("mesh-nats signal KILL: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "sent killed to nats-server") {
		t.Fatalf("expected it to say what it sent, got %q", out.String())
	}
	if got := e.waitExit(t, 10*time.Second); got != 128+int(syscall.SIGKILL) {
		t.Fatalf("expected mesh-nats to exit 137 when its server is killed, got %d", got)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("expected the pid file removed when the server is gone, got %v", err)
	}
}

func TestSignalRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--run-dir", dir}, 2, "want one signal name"},
		{[]string{"--run-dir", dir, "BOOM"}, 2, `unknown signal "BOOM"`},
		{[]string{"--run-dir", dir, "KILL"}, 1, "no server running"},
		{[]string{"--help"}, 0, "Usage: mesh-nats signal"},
	} {
		var out, errOut bytes.Buffer
		if code := runSignal(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.says) {
			t.Errorf("signal %q: expected %d saying %q, got %d: %s", c.args, c.code, c.says, code, errOut.String())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, PIDFile), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runSignal([]string{"--run-dir", dir, "KILL"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not a server's pid") {
		t.Errorf("a pid file naming pid 1 (the entrypoint itself): expected 1, got %d: %s", code, errOut.String())
	}
}
