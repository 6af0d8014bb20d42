package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/amqpdefs"
	meshctl "github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// The AMQP bus a cluster may raise beside its NATS one: the bus the mesh
// has today (design 25 §1), composed from the same description.
const (
	// AliasAMQP is the broker's name on the private network.
	AliasAMQP = "rabbitmq"
	// RoleAMQP is its container's role.
	RoleAMQP = "rabbitmq"

	amqpTLSPort     = "5671"
	amqpCertFile    = "/etc/rabbitmq/mesh-cert.pem"
	amqpKeyFile     = "/etc/rabbitmq/mesh-key.pem"
	amqpDefinitions = "/etc/rabbitmq/mesh-amqp-definitions.json"
	amqpReadyWithin = 3 * time.Minute
)

// AMQPBus is the RabbitMQ broker of a cluster and the AMQP credentials of
// the mesh's principals.
type AMQPBus struct {
	creds map[string]wire.Credential
}

// Credential is user's credential on the AMQP bus, its URL naming the
// broker as the private network knows it.
func (a *AMQPBus) Credential(user string) (wire.Credential, error) {
	c, ok := a.creds[user]
	if !ok {
		return wire.Credential{}, fmt.Errorf("no AMQP credential for %q", user)
	}
	return c, nil
}

// RaiseAMQP starts RabbitMQ on the private network with TLS (a server
// certificate from the cluster's own authority) and the definitions
// composed from the cluster's description, and mints every principal's
// AMQP credential. The image is built from Debian's packages when it is
// missing (MESH_RABBITMQ_IMAGE names another).
func (c *Cluster) RaiseAMQP(ctx context.Context) (*AMQPBus, error) {
	if !slices.ContainsFunc(c.topology.Members, func(m topology.Member) bool { return m.Kind == topology.KindRabbitMQ }) {
		return nil, fmt.Errorf("raise the AMQP bus: %w: this cluster's topology has no member of kind %s (it has: %s)",
			ErrUnknownMember, topology.KindRabbitMQ, strings.Join(c.topology.Names(), ", "))
	}
	clock := newPhases("amqp bus run=" + c.s.id)
	m, err := meshdesc.Load(c.MeshFile())
	if err != nil {
		return nil, err
	}
	image, err := rabbitmq.EnsureImage(ctx, c.s.builder, os.Getenv(rabbitmq.EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		return nil, infra("ensure the rabbitmq image", err)
	}
	clock.done("image")

	certPEM, keyPEM, fp, err := c.issue(AliasAMQP)
	if err != nil {
		return nil, err
	}
	passwords, hashes := map[string]string{}, map[string]string{}
	for _, u := range amqpdefs.Users(m) {
		if passwords[u], err = newPassword(); err != nil {
			return nil, err
		}
		if hashes[u], err = amqpdefs.NewPasswordHash(passwords[u]); err != nil {
			return nil, err
		}
	}
	doc, err := amqpdefs.Render(m, amqpdefs.Inputs{Hashes: hashes})
	if err != nil {
		return nil, err
	}

	opts := append(c.s.common(RoleAMQP),
		rabbitmq.WithConfig(
			"listeners.ssl.default = "+amqpTLSPort,
			"ssl_options.certfile = "+amqpCertFile,
			"ssl_options.keyfile = "+amqpKeyFile,
			// Clients pin the broker's certificate and log in with a
			// password; they present none.
			"ssl_options.verify = verify_none",
			"ssl_options.fail_if_no_peer_cert = false",
		),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytes.NewReader(certPEM), ContainerFilePath: amqpCertFile, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(keyPEM), ContainerFilePath: amqpKeyFile, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(doc), ContainerFilePath: amqpDefinitions, FileMode: 0o644},
		),
		network.WithNetworkName([]string{AliasAMQP}, c.networks[Private]),
		rabbitmq.WithStartupTimeout(amqpReadyWithin),
		// The broker runs as the image's own user: its Erlang cookie and
		// data must belong to the user rabbitmqctl runs as. Nothing of it
		// is bound from this host, so the run's uid is not needed.
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.User = "" }),
	)
	ctr, runErr := rabbitmq.Run(ctx, image, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, RoleAMQP, "", 0, got, runErr)
	if h != nil {
		c.setRole(RoleAMQP, h)
	}
	if err != nil {
		return nil, err
	}
	clock.done("broker")
	// The mesh's definitions go in beside the boot ones (the broker's
	// administrator); RabbitMQ merges them.
	if out, err := ctr.Ctl(ctx, "import_definitions", amqpDefinitions); err != nil {
		return nil, fmt.Errorf("import the mesh's AMQP definitions: %w\n%s", err, out)
	}
	clock.done("definitions")
	c.s.narrate("%s", clock.summary())

	bus := &AMQPBus{creds: map[string]wire.Credential{}}
	addr := AliasAMQP + ":" + amqpTLSPort
	for _, pl := range m.Placements() {
		u := wire.AMQPUser(pl.Node, pl.Module.Name)
		bus.creds[u] = wire.Credential{URL: wire.AMQPBusURL(u, passwords[u], addr), Fingerprint: fp, Node: pl.Node, Module: pl.Module.Name}
	}
	return bus, nil
}

// issue mints a server certificate for name from the authority genesis
// wrote into the cluster's state.
func (c *Cluster) issue(name string) (certPEM, keyPEM []byte, fingerprint string, err error) {
	caCert, err := os.ReadFile(meshctl.Layout{Dir: c.state}.CACert())
	if err != nil {
		return nil, nil, "", fmt.Errorf("read the cluster's authority: %w", err)
	}
	caKey, err := os.ReadFile(meshctl.Layout{Dir: c.state}.CAKey())
	if err != nil {
		return nil, nil, "", fmt.Errorf("read the cluster's authority: %w", err)
	}
	ca, err := pki.LoadCA(caCert, caKey)
	if err != nil {
		return nil, nil, "", err
	}
	if certPEM, keyPEM, err = ca.IssueServer([]string{name, "localhost", "127.0.0.1"}, time.Now()); err != nil {
		return nil, nil, "", err
	}
	fingerprint, err = pki.Fingerprint(certPEM)
	return certPEM, keyPEM, fingerprint, err
}

// newPassword is a random password for a principal of the AMQP bus.
func newPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mint password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ImageID is the id of the image ref names.
func (c *Cluster) ImageID(ctx context.Context, ref string) (string, error) {
	res, err := c.s.docker.ImageInspect(ctx, ref)
	if err != nil {
		return "", infra("inspect image "+ref, err)
	}
	return res.ID, nil
}
