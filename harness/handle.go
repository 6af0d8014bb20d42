package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
)

// Roles of the long-running containers of a cluster.
const (
	RoleNATS       = "nats"
	RoleController = "controller"
)

// defaultReadyTimeout bounds the wait for a container to say it is ready.
const defaultReadyTimeout = 60 * time.Second

// stopTimeout is how long Stop and Restart let a container's process
// exit on SIGTERM before Docker kills it.
const stopTimeout = 10 * time.Second

// Handle is a handle on one container of the run, for observing it
// from outside and for the faults a bed applies to it.
type Handle struct {
	docker *client.Client
	role   string
	id     string
	name   string
	// ready is the log text the container prints when it is ready; Start
	// and Restart wait for one more occurrence of it. Empty for one-shots.
	ready        string
	readyTimeout time.Duration
	// since is when the session took the container, if another had it
	// before (a broker or a store recycled, Pool): its logs are this
	// session's from then on.
	since time.Time
	// disturbed says a step stopped, started, killed, paused, moved or
	// faulted the container: a pooled member that was is not handed on.
	disturbed atomic.Bool
}

// State is what Docker says about a container.
type State struct {
	Running   bool
	StartedAt time.Time
	// Pid is the host pid of the container's first process; 0 when it is
	// not running.
	Pid      int
	ExitCode int
	// Status is Docker's word: created, running, exited …
	Status string
	// Image is the id of the image the container was created from.
	Image string
}

// Process is one process running in a container, as the engine sees it
// (pids in the host's namespace).
type Process struct {
	PID     int
	PPID    int
	Command string
	// UID and GID are the process's user and group ids, as the engine's
	// host numbers them (the container's own, without user namespaces);
	// -1 when the table does not say.
	UID, GID int
}

// ID is the container's full id.
func (c *Handle) ID() string { return c.id }

// Name is the container's Docker name (mesh-<run>-<role>).
func (c *Handle) Name() string { return c.name }

// Role is what the container plays in the run: nats, controller, genesis,
// probe-2 …
func (c *Handle) Role() string { return c.role }

// Inspect returns the container's state.
func (c *Handle) Inspect(ctx context.Context) (State, error) {
	res, err := c.docker.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil {
		return State{}, infra("inspect "+c.role, err)
	}
	st := res.Container.State
	if st == nil {
		return State{}, fmt.Errorf("inspect %s: no state in the answer", c.role)
	}
	out := State{Running: st.Running, Pid: st.Pid, ExitCode: st.ExitCode, Status: string(st.Status), Image: res.Container.Image}
	if st.StartedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, st.StartedAt)
		if err != nil {
			return State{}, fmt.Errorf("inspect %s: start time %q: %w", c.role, st.StartedAt, err)
		}
		out.StartedAt = t
	}
	return out, nil
}

// Processes lists the processes running in the container (the engine's
// "top"), so a step can see, for instance, nats-server as the child of
// the entrypoint and whether its pid changed.
func (c *Handle) Processes(ctx context.Context) ([]Process, error) {
	res, err := c.docker.ContainerTop(ctx, c.id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,ppid,uid,gid,args"}})
	if err != nil {
		return nil, infra("list processes of "+c.role, err)
	}
	return parseTop(res.Titles, res.Processes)
}

// parseTop reads the table of ps that the engine answers top with (ps
// -ef's, or ps -eo pid,ppid,uid,gid,args's).
func parseTop(titles []string, rows [][]string) ([]Process, error) {
	col := map[string]int{}
	for i, t := range titles {
		col[t] = i
	}
	pidCol, ok1 := col["PID"]
	ppidCol, ok2 := col["PPID"]
	cmdCol, ok3 := col["CMD"]
	if !ok3 {
		cmdCol, ok3 = col["COMMAND"]
	}
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("read processes: want columns PID, PPID and CMD, got %v", titles)
	}
	out := make([]Process, 0, len(rows))
	for _, r := range rows {
		if len(r) != len(titles) {
			return nil, fmt.Errorf("read processes: row %v does not match columns %v", r, titles)
		}
		pid, err := strconv.Atoi(r[pidCol])
		if err != nil {
			return nil, fmt.Errorf("read processes: pid %q: %w", r[pidCol], err)
		}
		ppid, err := strconv.Atoi(r[ppidCol])
		if err != nil {
			return nil, fmt.Errorf("read processes: ppid %q: %w", r[ppidCol], err)
		}
		p := Process{PID: pid, PPID: ppid, Command: r[cmdCol], UID: -1, GID: -1}
		for name, id := range map[string]*int{"UID": &p.UID, "GID": &p.GID} {
			if i, ok := col[name]; ok {
				// ps -ef names the user where it can; a number is read.
				if n, err := strconv.Atoi(r[i]); err == nil {
					*id = n
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Stop stops the container (SIGTERM, then SIGKILL after a grace period).
func (c *Handle) Stop(ctx context.Context) error {
	c.disturbed.Store(true)
	t := int(stopTimeout / time.Second)
	if _, err := c.docker.ContainerStop(ctx, c.id, client.ContainerStopOptions{Timeout: &t}); err != nil {
		return infra("stop "+c.role, err)
	}
	return nil
}

// Start starts a stopped container and waits until it says it is ready
// again.
func (c *Handle) Start(ctx context.Context) error {
	c.disturbed.Store(true)
	return c.untilReadyAgain(ctx, func() error {
		if _, err := c.docker.ContainerStart(ctx, c.id, client.ContainerStartOptions{}); err != nil {
			return infra("start "+c.role, err)
		}
		return nil
	})
}

// Restart restarts the container and waits until it says it is ready
// again. A restart gives the container a new start time and new
// processes; a reload must not.
func (c *Handle) Restart(ctx context.Context) error {
	c.disturbed.Store(true)
	return c.untilReadyAgain(ctx, func() error {
		t := int(stopTimeout / time.Second)
		if _, err := c.docker.ContainerRestart(ctx, c.id, client.ContainerRestartOptions{Timeout: &t}); err != nil {
			return infra("restart "+c.role, err)
		}
		return nil
	})
}

// untilReadyAgain does act, then waits for one more occurrence of the
// readiness line than there was before it.
func (c *Handle) untilReadyAgain(ctx context.Context, act func() error) error {
	if c.ready == "" {
		return act()
	}
	logs, err := c.Logs(ctx)
	if err != nil {
		return err
	}
	before := strings.Count(logs, c.ready)
	if err := act(); err != nil {
		return err
	}
	return c.waitReady(ctx, before+1)
}

// waitReady polls the logs until the readiness line has appeared n times,
// failing early if the container stops.
func (c *Handle) waitReady(ctx context.Context, n int) error {
	timeout := c.readyTimeout
	if timeout == 0 {
		timeout = defaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		logs, err := c.Logs(ctx)
		if err == nil && strings.Count(logs, c.ready) >= n {
			return nil
		}
		if err == nil {
			st, ierr := c.Inspect(ctx)
			if ierr == nil && !st.Running && st.Status != "created" && st.Status != "restarting" {
				return fmt.Errorf("wait for %s to be ready: it stopped (status %s, exit %d); last output:\n%s",
					c.role, st.Status, st.ExitCode, tail(logs, tailLines))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be ready (%q): %w; last output:\n%s", c.role, c.ready, ctx.Err(), tail(logs, tailLines))
		case <-tick.C:
		}
	}
}
