package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/controllerctr"
)

// StageFile copies the description at hostPath into the directory bound
// at /mesh, as name, so that a controller run sees it at /mesh/<name>.
// The copy is written to a temporary file and renamed, so a container
// never reads half of it.
func (c *Cluster) StageFile(hostPath, name string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("stage %s: %q is not a plain file name", hostPath, name)
	}
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return fmt.Errorf("stage description: %w", err)
	}
	tmp, err := os.CreateTemp(c.meshDir, ".stage-*")
	if err != nil {
		return fmt.Errorf("stage description: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("stage description: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("stage description: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("stage description: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.meshDir, name)); err != nil {
		return fmt.Errorf("stage description: %w", err)
	}
	return nil
}

// RunController runs mesh-controller once with args (for instance
// controller.Args("apply", "changed.yaml")) in a container with the
// cluster's state and descriptions bound, on the private network, and
// returns its combined output and exit status. err is set only when the
// container could not be run or did not finish; a non-zero exit is the
// controller's answer, not an error.
func (c *Cluster) RunController(ctx context.Context, args ...string) (output string, exit int, err error) {
	base := "controller"
	if len(args) > 0 && isWord(args[0]) {
		base += "-" + args[0]
	}
	return c.runController(ctx, base, args)
}

// Push sends the description staged as name (StageFile) to the running
// controller: mesh-controller push. A refused push is an error quoting
// what the command printed.
func (c *Cluster) Push(ctx context.Context, name string) error {
	return c.controllerOn(ctx, "push", name)
}

// Apply recomposes the mesh from the description staged as name
// (StageFile) beside the controller's state: mesh-controller apply. A
// refused apply is an error quoting what the command printed.
func (c *Cluster) Apply(ctx context.Context, name string) error {
	return c.controllerOn(ctx, "apply", name)
}

// controllerOn runs the controller's subcommand on the description staged
// as name, as RunController would, and makes an exit other than 0 an
// error.
func (c *Cluster) controllerOn(ctx context.Context, subcommand, name string) error {
	out, exit, err := c.RunController(ctx, controllerctr.Args(subcommand, name)...)
	if err != nil {
		return err
	}
	if exit != 0 {
		return fmt.Errorf("mesh-controller %s exited %d:\n%s", subcommand, exit, out)
	}
	return nil
}

// Status is the controller's whole status as JSON, what
// `mesh-controller status --json` prints on its standard output, read from
// whichever store the cluster's controller keeps (controllerctr.StoreArgs).
func (c *Cluster) Status(ctx context.Context) ([]byte, error) {
	out, err := c.controllerStdout(ctx, "status", controllerctr.StatusArgs())
	if err != nil {
		return nil, fmt.Errorf("the controller's status: %w", err)
	}
	return out, nil
}

// runController runs a controller command (runControllerCmd) and returns
// its output and exit status.
func (c *Cluster) runController(ctx context.Context, base string, args []string) (string, int, error) {
	got, err := c.runControllerCmd(ctx, base, args, c.readyTimeout)
	if err != nil {
		return "", -1, err
	}
	return got.output, got.exit, nil
}

// controllerStdout runs a controller command and returns what it printed
// on its standard output (its logs are on standard error), or an error
// quoting its output when it did not exit 0.
func (c *Cluster) controllerStdout(ctx context.Context, base string, args []string) ([]byte, error) {
	got, err := c.runControllerCmd(ctx, base, args, c.readyTimeout)
	if err != nil {
		return nil, err
	}
	if got.exit != 0 {
		return nil, fmt.Errorf("mesh-controller %s exited %d:\n%s", strings.Join(args[:min(2, len(args))], " "), got.exit, tail(got.output, tailLines))
	}
	return []byte(got.stdout), nil
}

// runControllerCmd runs mesh-controller with args, given the cluster's
// store when it has one (controllerctr.StoreArgs), and waits for it until
// timeout. It runs in the controller's container when that is up and no
// fault is applied to it, as an operator's docker exec would: an exec
// costs the engine a fifth of the CPU of a container of its own and a
// sixth of the time (0.09 against 0.47 core-seconds, 83 against 490 ms,
// measured on a 2-core machine), and the beds poll the controller's
// status hundreds of times. Otherwise, before the controller is raised
// (genesis) or while it is stopped, killed or paused, it runs in a
// one-shot container of its own, on the same image, binds and network.
// A command cut short because the controller went away under it is run
// again in a one-shot.
func (c *Cluster) runControllerCmd(ctx context.Context, base string, args []string, timeout time.Duration) (ran, error) {
	if h, started := c.controllerForExec(ctx); h != nil {
		cmd := append([]string{controllerctr.Binary}, controllerctr.StoreArgs(args, c.storeURL)...)
		got, err := h.execFor(ctx, timeout, cmd)
		if err == nil && got.exit == 0 {
			c.s.keepOutput(c.s.roleName(base), got.output)
			return got, nil
		}
		if st, inspectErr := h.Inspect(ctx); inspectErr == nil && st.Running && st.StartedAt.Equal(started) {
			// The controller stayed up: the command's own answer.
			if err != nil {
				return ran{}, err
			}
			c.s.keepOutput(c.s.roleName(base), got.output)
			return got, nil
		}
	}
	return c.runControllerOneShot(ctx, base, args, timeout)
}

// runControllerOneShot runs mesh-controller with args in a one-shot
// container of its own, as runControllerCmd does when it cannot exec.
func (c *Cluster) runControllerOneShot(ctx context.Context, base string, args []string, timeout time.Duration) (ran, error) {
	opts := append(c.controllerBinds(),
		testcontainers.WithCmd(args...),
		controllerctr.WithStore(c.storeURL),
		network.WithNetworkName(nil, c.networks[Private]),
	)
	h, exit, err := c.s.runOnce(ctx, base, c.images.controller, timeout, opts...)
	if err != nil {
		return ran{}, err
	}
	var stdout, stderr, both bytes.Buffer
	if err := h.copyLogs(ctx, io.MultiWriter(&stdout, &both), io.MultiWriter(&stderr, &both)); err != nil {
		return ran{}, err
	}
	return ran{stdout: stdout.String(), stderr: stderr.String(), output: both.String(), exit: exit}, nil
}

// controllerForExec is the controller's container and when it started,
// when it is running and no fault is applied to it; nil otherwise.
func (c *Cluster) controllerForExec(ctx context.Context) (*Handle, time.Time) {
	c.mu.Lock()
	h := c.roles[RoleController]
	_, faulted := c.faults[MemberController]
	c.mu.Unlock()
	if h == nil || faulted {
		return nil, time.Time{}
	}
	st, err := h.Inspect(ctx)
	if err != nil || !st.Running || st.Status == "paused" {
		return nil, time.Time{}
	}
	return h, st.StartedAt
}

// isWord reports whether s is a lower-case word fit to name a container's
// role after (the controller's subcommand).
func isWord(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
