// Package nats runs the mesh's nats container (image mesh-nats: our
// entrypoint supervising nats-server) for the harness, shaped like a
// testcontainers-go module: Run applies this package's defaults first and
// the caller's options after.
package nats

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Paths and ports inside the container.
const (
	// ConfigDir holds nats.conf and the TLS files it names; the
	// entrypoint watches nats.conf there.
	ConfigDir = "/etc/nats"
	// StoreDir is JetStream's store.
	StoreDir = "/data"
	// ClientPort is the TLS client port, the one mapped to the host.
	ClientPort = "4222/tcp"
	// MonitorPort is the monitoring port, bound to the private network
	// only and never mapped.
	MonitorPort = 8222
)

// ReadyLog is what nats-server logs once it accepts clients. The image
// has no shell, so readiness is read from the logs.
const ReadyLog = "Server is ready"

// DefaultStartupTimeout bounds the wait for ReadyLog.
const DefaultStartupTimeout = 60 * time.Second

// NATSContainer is a running nats container.
type NATSContainer struct {
	*testcontainers.DockerContainer
}

// Run starts a nats container from image and waits until nats-server is
// ready. The client port is published on the host's loopback only, on a
// port Docker chooses. On error the container, if one was created, is
// returned too, so the caller can read its logs and remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*NATSContainer, error) {
	defaults := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(ClientPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(ClientPort): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		testcontainers.WithWaitStrategy(wait.ForLog(ReadyLog).WithStartupTimeout(DefaultStartupTimeout)),
	}
	ctr, err := testcontainers.Run(ctx, image, append(defaults, opts...)...)
	var c *NATSContainer
	if ctr != nil {
		c = &NATSContainer{DockerContainer: ctr}
	}
	if err != nil {
		return c, fmt.Errorf("run nats: %w", err)
	}
	return c, nil
}

// WithConfigDir binds the host directory dir (nats.conf and its TLS
// files) at ConfigDir. A directory, not the file: an atomic rewrite of
// nats.conf replaces the file, and a file bind would keep the old one.
func WithConfigDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + ConfigDir)
}

// WithStoreDir binds the host directory dir as JetStream's store.
func WithStoreDir(dir string) testcontainers.CustomizeRequestOption {
	return withBind(dir + ":" + StoreDir)
}

// WithPoll sets how often the entrypoint looks at nats.conf. It replaces
// a --poll already in the command (the image's defaults carry one), or
// adds one before any "--" (what follows that goes to nats-server).
func WithPoll(d time.Duration) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if d <= 0 {
			return fmt.Errorf("nats poll interval: want > 0, got %s", d)
		}
		req.Cmd = setFlag(req.Cmd, "poll", d.String())
		return nil
	}
}

// setFlag returns args with flag name set to value: an existing
// --name=v or -name=v replaced, else --name=value put before any "--".
func setFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	set := false
	for i, a := range args {
		if a == "--" && !set {
			out = append(out, "--"+name+"="+value)
			out = append(out, args[i:]...)
			return out
		}
		if strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"=") {
			if !set {
				out = append(out, "--"+name+"="+value)
				set = true
			}
			continue
		}
		out = append(out, a)
	}
	if !set {
		out = append(out, "--"+name+"="+value)
	}
	return out
}

// WithStartupTimeout replaces the wait for ReadyLog with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForLog(ReadyLog).WithStartupTimeout(timeout))
}

// ClientAddress is host:port where the client port is reached from this
// host. Ask again after a restart: Docker may choose another port.
func (c *NATSContainer) ClientAddress(ctx context.Context) (string, error) {
	p, err := c.MappedPort(ctx, ClientPort)
	if err != nil {
		return "", fmt.Errorf("nats client address: %w", err)
	}
	return net.JoinHostPort("127.0.0.1", p.Port()), nil
}

func withBind(bind string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, bind)
	})
}
