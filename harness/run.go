package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/harness/owner"
)

// defaultOneShotTimeout bounds a one-shot container's run.
const defaultOneShotTimeout = 2 * time.Minute

// common returns the options every container of the run gets: its name,
// the run's labels and its role, this process's user and group (so what
// it writes into the binds is ours to read and to remove), and
// testcontainers-go's log going to the run's log file.
func (s *Session) common(role string) []testcontainers.ContainerCustomizer {
	labels := maps.Clone(s.labels)
	labels[LabelRole] = role
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	return []testcontainers.ContainerCustomizer{
		testcontainers.WithName(s.containerName(role)),
		testcontainers.WithLabels(labels),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.User = user }),
		testcontainers.WithLogger(s.tcLog),
	}
}

// track records a container the run created. If Close has begun, the
// container may have been missed by it, so track removes it and fails.
func (s *Session) track(ctx context.Context, role, id, ready string, readyTimeout time.Duration) (*Handle, error) {
	c := &Handle{docker: s.docker, role: role, id: id, name: s.containerName(role), ready: ready, readyTimeout: readyTimeout}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.containers = append(s.containers, c)
	}
	s.mu.Unlock()
	if closed {
		err := owner.Remove(context.WithoutCancel(ctx), s.docker, LabelRun+"="+s.id)
		return nil, errors.Join(fmt.Errorf("start %s: %w", role, ErrClosed), err)
	}
	return c, nil
}

// started is what the role-specific Run functions return: a container
// that may exist even when the call failed.
type started interface {
	GetContainerID() string
}

// adopt tracks what a Run call produced and turns its failure into the
// run's terms: a container Docker never started is infrastructure; one
// that started and then did not become ready (or did not finish) is the
// product's failure, reported with the tail of its output.
func (s *Session) adopt(ctx context.Context, role, ready string, readyTimeout time.Duration, ctr started, runErr error) (*Handle, error) {
	var c *Handle
	if ctr != nil && ctr.GetContainerID() != "" {
		var err error
		if c, err = s.track(ctx, role, ctr.GetContainerID(), ready, readyTimeout); err != nil {
			return nil, err
		}
	}
	if runErr == nil {
		if c == nil {
			return nil, infra("start "+role, errors.New("no container id"))
		}
		return c, nil
	}
	if c == nil {
		return nil, infra("start "+role, runErr)
	}
	st, err := c.Inspect(context.WithoutCancel(ctx))
	if err != nil || st.StartedAt.IsZero() {
		return c, infra("start "+role, runErr)
	}
	logs, _ := c.Logs(context.WithoutCancel(ctx))
	return c, fmt.Errorf("start %s: %w; last output:\n%s", role, runErr, tail(logs, tailLines))
}

// runOnce runs a one-shot container of kind base (genesis, apply,
// probe …) to completion and returns it and its exit code. The container
// is kept, for SaveLogs, until Close.
func (s *Session) runOnce(ctx context.Context, base, image string, timeout time.Duration, opts ...testcontainers.ContainerCustomizer) (*Handle, int, error) {
	if timeout == 0 {
		timeout = defaultOneShotTimeout
	}
	role := s.roleName(base)
	all := append(s.common(role), opts...)
	all = append(all, testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForExit().WithExitTimeout(timeout)))
	ctr, err := testcontainers.Run(ctx, image, all...)
	var got started
	if ctr != nil {
		got = ctr
	}
	c, err := s.adopt(ctx, role, "", 0, got, err)
	if err != nil {
		return c, -1, err
	}
	st, err := c.Inspect(ctx)
	if err != nil {
		return c, -1, err
	}
	if st.Running {
		return c, -1, fmt.Errorf("run %s: still running after %s", role, timeout)
	}
	return c, st.ExitCode, nil
}
