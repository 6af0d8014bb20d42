package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// tailLines is how much of a container's output an error quotes.
const tailLines = 30

// Logs returns everything the container wrote, stdout and stderr
// interleaved as they were written.
func (c *Handle) Logs(ctx context.Context) (string, error) {
	var b bytes.Buffer
	if err := c.copyLogs(ctx, &b, &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// stdout returns what the container wrote to its standard output alone.
func (c *Handle) stdout(ctx context.Context) (string, error) {
	var out, discard bytes.Buffer
	if err := c.copyLogs(ctx, &out, &discard); err != nil {
		return "", err
	}
	return out.String(), nil
}

func (c *Handle) copyLogs(ctx context.Context, stdout, stderr io.Writer) error {
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true}
	if !c.since.IsZero() {
		opts.Since = c.since.Format(time.RFC3339Nano)
	}
	rc, err := c.docker.ContainerLogs(ctx, c.id, opts)
	if err != nil {
		return infra("read logs of "+c.role, err)
	}
	defer rc.Close()
	// Our containers run without a TTY, so the stream is multiplexed.
	if _, err := stdcopy.StdCopy(stdout, stderr, rc); err != nil {
		return infra("read logs of "+c.role, err)
	}
	return nil
}

// SaveLogs writes the output of every container the session has run —
// the long-running ones and the finished one-shots, which are kept until
// Close for this — and of every command run in a running container
// (keepOutput) to dir/<role>.log. It attempts every one and returns every
// failure.
func (s *Session) SaveLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save logs: %w", err)
	}
	var result *multierror.Error
	save := func(role, logs string) {
		path := filepath.Join(dir, role+".log")
		if err := os.WriteFile(path, []byte(logs), 0o644); err != nil {
			result = multierror.Append(result, fmt.Errorf("save logs of %s: %w", role, err))
		}
	}
	for _, c := range s.tracked() {
		logs, err := c.Logs(ctx)
		if err != nil {
			result = multierror.Append(result, err)
			continue
		}
		save(c.role, logs)
	}
	s.mu.Lock()
	execs := slices.Clone(s.execs)
	s.mu.Unlock()
	for _, e := range execs {
		save(e.role, e.output)
	}
	return result.ErrorOrNil()
}

// keepOutput keeps what a command run in a running container printed,
// under role, for SaveLogs: the evidence a one-shot container's logs
// would have been.
func (s *Session) keepOutput(role, output string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs = append(s.execs, execOutput{role: role, output: output})
}

// tracked is a snapshot of the containers the session has created.
func (s *Session) tracked() []*Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Handle(nil), s.containers...)
}

// tail returns the last n lines of text.
func tail(text string, n int) string {
	text = strings.TrimRight(text, "\n")
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
