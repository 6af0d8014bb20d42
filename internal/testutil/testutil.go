// Package testutil holds the small helpers several packages' tests share.
package testutil

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// SyncBuffer is a log sink that is safe to read while a program under
// test writes to it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// FreePort is a loopback TCP port that was free a moment ago, for a
// configuration that must name its port before the server starts.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DockerClient returns a client of the Docker engine, closed when the
// test ends, or skips the test, saying why, in -short mode or when no
// engine answers. Ryuk is off: its image cannot be pulled here.
func DockerClient(t testing.TB) *testcontainers.DockerClient {
	t.Helper()
	if testing.Short() {
		t.Skip("container test skipped in -short mode")
	}
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		t.Skipf("no Docker engine answers, skipping: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// DeadPID is a process id nothing runs as: above the largest pid_max
// Linux allows (4194304), and checked with signal 0.
func DeadPID(t testing.TB) int {
	t.Helper()
	for pid := 4194304 + 1000; pid < 4194304+2000; pid++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return pid
		}
	}
	t.Fatal("found no dead pid")
	return 0
}

// TerminateAtCleanup removes c when the test ends, showing its logs first
// if the test failed. Call it before checking the error of the run that
// made c: a container that failed its wait is removed too.
func TerminateAtCleanup(t testing.TB, c testcontainers.Container) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if r, err := c.Logs(ctx); err != nil {
				t.Logf("no logs of container %s: %v", c.GetContainerID(), err)
			} else {
				b, _ := io.ReadAll(r)
				_ = r.Close()
				t.Logf("logs of container %s:\n%s", c.GetContainerID(), bytes.TrimSpace(b))
			}
		}
		if err := c.Terminate(context.Background()); err != nil {
			t.Errorf("terminate container %s: %v", c.GetContainerID(), err)
		}
	})
}
