package harness

import (
	"context"
	"fmt"
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

func (c *Cluster) runController(ctx context.Context, base string, args []string) (string, int, error) {
	return c.runControllerFor(ctx, base, args, c.readyTimeout)
}

// runControllerFor is runController for a command that may run longer
// than a start: it is waited for until timeout.
func (c *Cluster) runControllerFor(ctx context.Context, base string, args []string, timeout time.Duration) (string, int, error) {
	h, exit, err := c.runControllerOnceFor(ctx, base, args, timeout)
	if err != nil {
		return "", -1, err
	}
	out, err := h.Logs(ctx)
	if err != nil {
		return "", -1, err
	}
	return out, exit, nil
}

// runControllerOnce runs a controller one-shot with args, given the
// cluster's store when it has one (controllerctr.StoreArgs), and returns
// its container and exit status.
func (c *Cluster) runControllerOnce(ctx context.Context, base string, args []string) (*Handle, int, error) {
	return c.runControllerOnceFor(ctx, base, args, c.readyTimeout)
}

func (c *Cluster) runControllerOnceFor(ctx context.Context, base string, args []string, timeout time.Duration) (*Handle, int, error) {
	opts := append(c.controllerBinds(),
		testcontainers.WithCmd(args...),
		controllerctr.WithStore(c.storeURL),
		network.WithNetworkName(nil, c.networks[Private]),
	)
	return c.s.runOnce(ctx, base, c.images.controller, timeout, opts...)
}

// controllerStdout runs a controller one-shot and returns what it printed
// on its standard output (its logs are on standard error), or an error
// quoting its output when it did not exit 0.
func (c *Cluster) controllerStdout(ctx context.Context, base string, args []string) ([]byte, error) {
	h, exit, err := c.runControllerOnce(ctx, base, args)
	if err != nil {
		return nil, err
	}
	if exit != 0 {
		logs, _ := h.Logs(ctx)
		return nil, fmt.Errorf("mesh-controller %s exited %d:\n%s", strings.Join(args[:min(2, len(args))], " "), exit, tail(logs, tailLines))
	}
	out, err := h.stdout(ctx)
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
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
