// Package hostctr runs a node's host (image mesh-host) for the harness,
// shaped like a testcontainers-go module: Run applies this package's
// defaults first and the caller's options after, returns the container
// even on error, and waits explicitly for the host to say it is
// connected as itself.
package hostctr

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/mesh/host"
)

// Paths inside the container, as the image's default command names them
// (images.Host).
const (
	// TokenFile is the enrolment token the host enrols with, once.
	TokenFile = "/etc/mesh-host/token.json"
	// StateDir keeps the node's sealing key and its own credential.
	StateDir = "/var/lib/mesh-host"
)

// ReadyLog is the JSON line's message the host logs once it is connected
// to the bus as the node's own host user (host.ReadyLog). The image has
// no shell, so readiness is read from the logs.
const ReadyLog = `"msg":"` + host.ReadyLog + `"`

// DefaultStartupTimeout bounds the wait for ReadyLog: enrolling and
// connecting again as itself, which takes the controller's answer and the
// server's reload of the composed users.
const DefaultStartupTimeout = 60 * time.Second

// HostContainer is a running host container.
type HostContainer struct {
	*testcontainers.DockerContainer
}

// Run starts the host from image (its default command: run --token
// TokenFile --state StateDir) and waits until it has enrolled and is
// connected as itself. Give it a token (WithToken) unless its state holds
// its credential already (WithStateDir of a host that enrolled). On error
// the container, if one was created, is returned too, so the caller can
// read its logs and remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*HostContainer, error) {
	defaults := []testcontainers.ContainerCustomizer{
		WithStartupTimeout(DefaultStartupTimeout),
	}
	ctr, err := testcontainers.Run(ctx, image, append(defaults, opts...)...)
	var c *HostContainer
	if ctr != nil {
		c = &HostContainer{DockerContainer: ctr}
	}
	if err != nil {
		return c, fmt.Errorf("run host: %w", err)
	}
	return c, nil
}

// WithToken puts the enrolment token doc (the credential mesh-controller
// token issue printed) at TokenFile before the host starts, readable by
// root alone (0600): the host runs as root (AsRoot), and its modules,
// each a user of its own, must not read it.
func WithToken(doc []byte) testcontainers.CustomizeRequestOption {
	return testcontainers.WithFiles(testcontainers.ContainerFile{
		Reader: bytes.NewReader(doc), ContainerFilePath: TokenFile, FileMode: 0o600,
	})
}

// AsRoot runs the host as root, whatever user an earlier option chose:
// it runs each module as a user of its own, which takes root, and
// refuses to run modules otherwise.
func AsRoot() testcontainers.CustomizeRequestOption {
	return testcontainers.WithConfigModifier(func(c *container.Config) { c.User = "0:0" })
}

// WithStateDir binds the host directory dir at StateDir, so that the
// node's key and credential outlive the container (and a person can read
// them). Without it they live in the container's own layer, which a stop
// and a start keep too.
func WithStateDir(dir string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, dir+":"+StateDir)
	})
}

// WithStartupTimeout replaces the wait for ReadyLog with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForLog(ReadyLog).WithStartupTimeout(timeout))
}
