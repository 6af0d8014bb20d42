// Package controllerctr runs the mesh controller's container (image
// mesh-controller) for the harness, shaped like a testcontainers-go
// module: Run applies this package's defaults first and the caller's
// options after.
package controllerctr

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Paths inside the container.
const (
	// StateDir is the controller's state: TLS material, secrets, the
	// composed nats configuration, the credentials.
	StateDir = "/var/lib/mesh"
	// MeshDir holds the mesh descriptions; MeshFile is the current one.
	MeshDir  = "/mesh"
	MeshFile = MeshDir + "/mesh.yaml"
)

// ReadyLog is what `mesh-controller run` logs once the streams and
// consumers are asserted. The image has no shell, so readiness is read
// from the logs.
const ReadyLog = `"msg":"ready"`

// DefaultStartupTimeout bounds the wait for ReadyLog.
const DefaultStartupTimeout = 60 * time.Second

// ControllerContainer is a running controller container.
type ControllerContainer struct {
	*testcontainers.DockerContainer
}

// Args is the command line of a controller subcommand (genesis, apply,
// run) on the description named file in MeshDir and the state in StateDir.
func Args(subcommand, file string) []string {
	return []string{subcommand, "--mesh", path.Join(MeshDir, file), "--state", StateDir}
}

// Run starts `mesh-controller run` on MeshFile from image and waits until
// it is ready. On error the container, if one was created, is returned
// too, so the caller can read its logs and remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*ControllerContainer, error) {
	defaults := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(Args("run", path.Base(MeshFile))...),
		testcontainers.WithWaitStrategy(wait.ForLog(ReadyLog).WithStartupTimeout(DefaultStartupTimeout)),
	}
	ctr, err := testcontainers.Run(ctx, image, append(defaults, opts...)...)
	var c *ControllerContainer
	if ctr != nil {
		c = &ControllerContainer{DockerContainer: ctr}
	}
	if err != nil {
		return c, fmt.Errorf("run controller: %w", err)
	}
	return c, nil
}

// WithStateDir binds the host directory dir at StateDir.
func WithStateDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + StateDir)
}

// WithMeshDir binds the host directory dir, read-only, at MeshDir. A
// directory, not a file: descriptions staged later are seen by the next
// container, and a replaced file is seen at all.
func WithMeshDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + MeshDir + ":ro")
}

// WithStartupTimeout replaces the wait for ReadyLog with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForLog(ReadyLog).WithStartupTimeout(timeout))
}

func withBind(bind string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, bind)
	})
}
