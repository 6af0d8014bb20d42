package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
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

func (c *Cluster) runController(ctx context.Context, base string, args []string) (string, int, error) {
	opts := append(c.controllerBinds(),
		testcontainers.WithCmd(args...),
		network.WithNetworkName(nil, c.networks[Private]),
	)
	h, exit, err := c.s.runOnce(ctx, base, c.images.controller, c.readyTimeout, opts...)
	if err != nil {
		return "", -1, err
	}
	out, err := h.Logs(ctx)
	if err != nil {
		return "", -1, err
	}
	return out, exit, nil
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
