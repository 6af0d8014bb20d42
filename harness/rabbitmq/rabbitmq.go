// Package rabbitmq runs the mesh's AMQP broker (RabbitMQ) for the harness,
// shaped like testcontainers-go's modules/rabbitmq: Run applies this
// package's defaults first and the caller's options after, and returns
// the container even on error.
//
// The image is ours, mesh-rabbitmq:local, built from Debian's
// rabbitmq-server package by harness/images (no registry is needed), or an
// official image (rabbitmq:3.12) where one can be pulled. Users, virtual
// hosts and permissions are given as options and loaded at boot from a
// definitions file, so they need no shell in the image and exist before
// the first client connects.
package rabbitmq

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Ports and paths inside the container.
const (
	// AMQPPort is the AMQP 0-9-1 port, the one mapped to the host.
	AMQPPort = "5672/tcp"
	// ManagementPort is the management API's (HTTP). Run does not publish
	// it, and our image does not EXPOSE it: it is reached on the
	// container's network, or published by a test that asks for it.
	ManagementPort = "15672/tcp"
	// ConfigFile is the rabbitmq.conf fragment Run writes. RabbitMQ reads
	// conf.d in name order, so it comes after the image's own (ours has
	// 10-mesh.conf, the official image 10-defaults.conf).
	ConfigFile = "/etc/rabbitmq/conf.d/90-mesh-run.conf"
	// DefinitionsFile holds the users, virtual hosts and permissions,
	// loaded at boot (load_definitions in ConfigFile).
	DefinitionsFile = "/etc/rabbitmq/mesh-definitions.json"
)

// ReadyLog is what RabbitMQ logs once its listeners are up and the
// definitions are loaded.
const ReadyLog = "Server startup complete"

// DefaultStartupTimeout bounds the wait for ReadyLog. The Debian image
// starts in about 15 s on two cores; the margin is for a loaded machine.
const DefaultStartupTimeout = 2 * time.Minute

// RabbitMQContainer is a running RabbitMQ container.
type RabbitMQContainer struct {
	*testcontainers.DockerContainer
	// AdminUsername and AdminPassword are the administrator's, with every
	// permission on every virtual host of the definitions.
	AdminUsername string
	AdminPassword string

	passwords map[string]string
	// conf is the configuration the broker booted with, for Reuse.
	conf []byte
	// ctlOnly asks rabbitmqctl even where erl_call is to be had: what an
	// image without erl_call does (a test of the fallback sets it).
	ctlOnly bool
}

// Run starts RabbitMQ from image and waits until it serves AMQP. The AMQP
// port is published on the host's loopback only, on a port Docker
// chooses. Options of this package (WithAdmin, WithUser …) may be mixed
// with testcontainers-go customizers: labels, network aliases
// (network.WithNetworkName), log consumers. On error the container, if one
// was created, is returned too, so the caller can read its logs and
// remove it.
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*RabbitMQContainer, error) {
	s := defaultSettings()
	for _, o := range opts {
		if apply, ok := o.(Option); ok {
			apply(&s)
		}
	}
	conf, defs, err := s.render()
	if err != nil {
		return nil, fmt.Errorf("run rabbitmq: %w", err)
	}
	defaults := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(AMQPPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(AMQPPort): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		waitReady(DefaultStartupTimeout),
	}
	// The files come from every option, so they are added after all of
	// them; they add to the request and override nothing of the caller's.
	files := testcontainers.WithFiles(
		testcontainers.ContainerFile{Reader: bytes.NewReader(conf), ContainerFilePath: ConfigFile, FileMode: 0o644},
		testcontainers.ContainerFile{Reader: bytes.NewReader(defs), ContainerFilePath: DefinitionsFile, FileMode: 0o644},
	)
	all := append(append(defaults, opts...), files)
	ctr, err := testcontainers.Run(ctx, image, all...)
	var c *RabbitMQContainer
	if ctr != nil {
		c = &RabbitMQContainer{DockerContainer: ctr, AdminUsername: s.admin.name, AdminPassword: s.admin.password, passwords: s.passwords(), conf: conf}
	}
	if err != nil {
		return c, fmt.Errorf("run rabbitmq: %w", err)
	}
	return c, nil
}

// WithStartupTimeout replaces the wait for readiness with one of timeout.
func WithStartupTimeout(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return waitReady(timeout)
}

// waitReady waits for ReadyLog. Not for the port as well: testcontainers'
// external port check dials the engine's gateway address, where a port
// published on the loopback alone does not answer.
func waitReady(timeout time.Duration) testcontainers.CustomizeRequestOption {
	return testcontainers.WithWaitStrategyAndDeadline(timeout, wait.ForLog(ReadyLog).WithStartupTimeout(timeout))
}

// Address is host:port where AMQP is reached from this host. Ask again
// after a restart: Docker may choose another port.
func (c *RabbitMQContainer) Address(ctx context.Context) (string, error) {
	p, err := c.MappedPort(ctx, AMQPPort)
	if err != nil {
		return "", fmt.Errorf("rabbitmq address: %w", err)
	}
	return net.JoinHostPort("127.0.0.1", p.Port()), nil
}

// AmqpURL is the administrator's URL of the virtual host "/" from this
// host.
func (c *RabbitMQContainer) AmqpURL(ctx context.Context) (string, error) {
	return c.AmqpURLFor(ctx, c.AdminUsername, "/")
}

// AmqpURLFor is user's URL of vhost from this host, with the password the
// user was given (WithAdmin or WithUser).
func (c *RabbitMQContainer) AmqpURLFor(ctx context.Context, user, vhost string) (string, error) {
	pass, ok := c.passwords[user]
	if !ok {
		return "", fmt.Errorf("rabbitmq url: %w: %q", ErrUnknownUser, user)
	}
	addr, err := c.Address(ctx)
	if err != nil {
		return "", err
	}
	return URL(addr, user, pass, vhost), nil
}

// URL is the amqp:// URL of vhost at addr (host:port) for user. The
// virtual host "/" is the URL's empty path; any other is escaped into it.
func URL(addr, user, password, vhost string) string {
	u := url.URL{Scheme: "amqp", User: url.UserPassword(user, password), Host: addr}
	if vhost != "/" && vhost != "" {
		u.Path = "/" + vhost
		u.RawPath = "/" + url.PathEscape(vhost)
	}
	return u.String()
}

// ImportDefinitions imports the definitions doc (a definitions file's
// JSON) beside those the broker has, which RabbitMQ merges: through the
// management API when its port is published on this host, as it is in
// the harness's clusters, else with rabbitmqctl import_definitions from
// path, a copy of doc in the container. Both end in the broker's same
// import; rabbitmqctl boots an Erlang VM of its own for it (about a
// second and a core-second on a 2-core machine), the API answers in
// milliseconds.
func (c *RabbitMQContainer) ImportDefinitions(ctx context.Context, doc []byte, path string) error {
	p, err := c.MappedPort(ctx, ManagementPort)
	if err != nil {
		if out, err := c.Ctl(ctx, "import_definitions", path); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", p.Port()), Path: "/api/definitions"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("import definitions: %w", err)
	}
	req.SetBasicAuth(c.AdminUsername, c.AdminPassword)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("import definitions: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("import definitions: the management API answered %s: %s", res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Ctl runs rabbitmqctl with args in the container and returns its output,
// for what the definitions cannot say (closing connections, listing
// queues). Both our image and the official ones have it.
func (c *RabbitMQContainer) Ctl(ctx context.Context, args ...string) (string, error) {
	code, r, err := c.Exec(ctx, append([]string{"rabbitmqctl"}, args...), tcexec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: %w", strings.Join(args, " "), err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: read output: %w", strings.Join(args, " "), err)
	}
	if code != 0 {
		return string(out), fmt.Errorf("rabbitmqctl %s: exit status %d: %s", strings.Join(args, " "), code, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
