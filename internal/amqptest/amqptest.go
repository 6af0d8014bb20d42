// Package amqptest runs RabbitMQ in a container with the definitions
// composed from a mesh description (package amqpdefs), served over TLS
// with a certificate of its own, and hands out every principal's
// credential: internal/natstest's twin for the AMQP bus. A test that uses
// it is skipped in -short mode and where no Docker engine answers.
//
// The image is mesh-rabbitmq:local, built from Debian's packages by
// harness/images when it is missing, or the one MESH_RABBITMQ_IMAGE names.
package amqptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Paths and the TLS port inside the container.
const (
	certFile        = "/etc/rabbitmq/mesh-cert.pem"
	keyFile         = "/etc/rabbitmq/mesh-key.pem"
	definitionsFile = "/etc/rabbitmq/mesh-amqp-definitions.json"
	tlsPort         = "5671/tcp"
)

// Broker is a running RabbitMQ and every principal's credential.
type Broker struct {
	// Container is the broker's container.
	Container *rabbitmq.RabbitMQContainer
	// Creds maps each user (amqpdefs.Users, amqpdefs.ControlUsers) to its
	// credential, pointed at this broker through the host's loopback and
	// naming its user's virtual host.
	Creds map[string]wire.Credential
	// Fingerprint is the broker certificate's.
	Fingerprint string
	// Definitions are what the broker was given.
	Definitions amqpdefs.Definitions

	addr string
	// doc is the definitions imported (withAdmin).
	doc []byte
}

type settings struct {
	maxDeliver int
	// Host ports on the loopback; 0: any.
	tlsPort, managementPort int
}

// Option changes what Start gives the broker.
type Option func(*settings)

// WithMaxDeliver sets the deliveries an event gets before it is
// dead-lettered (amqpdefs.Inputs.MaxDeliver).
func WithMaxDeliver(n int) Option { return func(s *settings) { s.maxDeliver = n } }

// WithManagementAt publishes the management API on host port p of the
// loopback, the port a description names before the broker runs; without
// it, on a port Docker chooses (ManagementURL).
func WithManagementAt(p int) Option { return func(s *settings) { s.managementPort = p } }

// Start runs the broker for m and waits until it serves; it is removed
// when the test ends. It skips the test where there is no Docker engine.
func Start(t testing.TB, m *meshdesc.Mesh, opts ...Option) *Broker {
	t.Helper()
	var s settings
	for _, o := range opts {
		o(&s)
	}
	ctx, cancel, image, labels := prepare(t)
	defer cancel()

	// The controller mints the bus, as it does for a mesh; the authority
	// is this test's own, since there is no genesis.
	ca, err := pki.NewCA("amqptest", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	minted, err := rollout.MintAMQP(m, ca, rollout.AMQPOptions{
		Names:      append([]string{"localhost", "127.0.0.1", "rabbitmq"}, m.Bus.Names...),
		MaxDeliver: s.maxDeliver,
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := withAdmin(minted.Document, rabbitmq.DefaultAdminUsername)
	if err != nil {
		t.Fatal(err)
	}
	ctr := run(ctx, t, image, labels, Files{CertPEM: minted.CertPEM, KeyPEM: minted.KeyPEM, Definitions: doc}, s)
	br := &Broker{Container: ctr, Fingerprint: minted.Fingerprint, Definitions: minted.Definitions, doc: doc}
	br.importDefinitions(ctx, t)
	p, err := ctr.MappedPort(ctx, tlsPort)
	if err != nil {
		t.Fatal(err)
	}
	br.addr = net.JoinHostPort("127.0.0.1", p.Port())
	br.Creds = map[string]wire.Credential{}
	for _, u := range slices.Concat(minted.Users, minted.ControlUsers) {
		if br.Creds[u], err = minted.Credential(u, br.addr); err != nil {
			t.Fatal(err)
		}
	}
	return br
}

// prepare skips the test in -short mode or without Docker, reaps what
// dead runs left, and has the image.
func prepare(t testing.TB) (context.Context, context.CancelFunc, string, map[string]string) {
	t.Helper()
	if testing.Short() {
		t.Skip("RabbitMQ container tests are skipped in -short mode")
	}
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	docker := testutil.DockerClient(t)
	// Labelled as this process's, so that a test killed before its
	// cleanup (a timeout) leaves nothing the next one does not reap.
	labels, err := owner.Claim(ctx, docker.Client, "amqptest")
	if err != nil {
		t.Logf("reap the leftovers of dead test runs: %v", err)
	}

	b := &images.Builder{Out: io.Discard, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	image, err := rabbitmq.EnsureImage(ctx, b, os.Getenv(rabbitmq.EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		t.Fatalf("ensure the rabbitmq image: %v", err)
	}

	return ctx, cancel, image, labels
}

// Files are what a broker starts with: its certificate and key, and the
// definitions it imports.
type Files struct {
	CertPEM, KeyPEM, Definitions []byte
}

// StartWith runs the broker with files a genesis wrote (a mesh raised on
// AMQP: rollout.Genesis with rollout.AMQP), its TLS listener on this
// host's loopback at hostPort, the port the credentials name (0: any), and
// waits until it serves. The mesh's credentials are the store's; the
// Broker has none.
func StartWith(t testing.TB, f Files, hostPort int, opts ...Option) *Broker {
	t.Helper()
	s := settings{tlsPort: hostPort}
	for _, o := range opts {
		o(&s)
	}
	ctx, cancel, image, labels := prepare(t)
	defer cancel()
	doc, err := withAdmin(f.Definitions, rabbitmq.DefaultAdminUsername)
	if err != nil {
		t.Fatal(err)
	}
	f.Definitions = doc
	ctr := run(ctx, t, image, labels, f, s)
	br := &Broker{Container: ctr, doc: doc}
	br.importDefinitions(ctx, t)
	p, err := ctr.MappedPort(ctx, tlsPort)
	if err != nil {
		t.Fatal(err)
	}
	br.addr = net.JoinHostPort("127.0.0.1", p.Port())
	return br
}

// port is a host port binding's port: "" for any.
func port(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// run starts the broker's container with f and removes it when the test
// ends.
func run(ctx context.Context, t testing.TB, image string, labels map[string]string, f Files, s settings) *rabbitmq.RabbitMQContainer {
	t.Helper()

	// The management API is published on the loopback always: the
	// definitions are imported through it (rabbitmq.ImportDefinitions),
	// and a test that asks (WithManagement) reads it.
	publish := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(rabbitmq.ManagementPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings[network.MustParsePort(rabbitmq.ManagementPort)] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: port(s.managementPort)}}
		}),
	}
	ctr, err := rabbitmq.Run(ctx, image, append([]testcontainers.ContainerCustomizer{
		rabbitmq.WithConfig(
			"listeners.ssl.default = 5671",
			"ssl_options.certfile = "+certFile,
			"ssl_options.keyfile = "+keyFile,
			// Clients are not asked for certificates: they pin the
			// broker's and log in with a password.
			"ssl_options.verify = verify_none",
			"ssl_options.fail_if_no_peer_cert = false",
		),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytes.NewReader(f.CertPEM), ContainerFilePath: certFile, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(f.KeyPEM), ContainerFilePath: keyFile, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(f.Definitions), ContainerFilePath: definitionsFile, FileMode: 0o644},
		),
		testcontainers.WithLabels(labels),
		testcontainers.WithExposedPorts(tlsPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings[network.MustParsePort(tlsPort)] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: port(s.tlsPort)}}
		}),
	}, publish...)...)
	return kept(t, ctr, err)
}

// importDefinitions loads the mesh's definitions into the running broker.
// The harness's boot definitions carry its administrator; the mesh's are
// imported beside them, which RabbitMQ merges, with the administrator
// holding every grant in the mesh's virtual hosts, as the controller's
// does (genesis --bus amqp): the management API asks it of whoever
// declares a queue there. The container has them in its file too.
func (b *Broker) importDefinitions(ctx context.Context, t testing.TB) {
	t.Helper()
	if err := b.Container.ImportDefinitions(ctx, b.doc, definitionsFile); err != nil {
		t.Fatalf("import the mesh's definitions: %v", err)
	}
}

// withAdmin is the definitions doc with every grant in the mesh's virtual
// hosts given to admin too; nothing else of doc changes.
func withAdmin(doc []byte, admin string) ([]byte, error) {
	var defs map[string]any
	if err := json.Unmarshal(doc, &defs); err != nil {
		return nil, fmt.Errorf("read the definitions: %w", err)
	}
	perms, _ := defs["permissions"].([]any)
	for _, vhost := range []string{wire.AMQPVhost, wire.AMQPControlVhost} {
		perms = append(perms, amqpdefs.Permission{User: admin, Vhost: vhost, Configure: ".*", Write: ".*", Read: ".*"})
	}
	defs["permissions"] = perms
	return json.Marshal(defs)
}

// ManagementURL is the management API's URL from this host; the
// administrator is the container's AdminUsername.
func (b *Broker) ManagementURL(ctx context.Context, t testing.TB) string {
	t.Helper()
	p, err := b.Container.MappedPort(ctx, rabbitmq.ManagementPort)
	if err != nil {
		t.Fatalf("management port: %v", err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", p.Port())
}

// Addr is host:port of the TLS listener from this host.
func (b *Broker) Addr() string { return b.addr }

// Dial connects as user with its credential: TLS with the certificate
// pinned and its name checked, the mesh's virtual host. It is closed when
// t ends.
func (b *Broker) Dial(t testing.TB, user string) *amqp.Connection {
	t.Helper()
	cred, ok := b.Creds[user]
	if !ok {
		t.Fatalf("no credential for user %q", user)
	}
	conn, err := amqp.DialConfig(cred.URL, amqp.Config{TLSClientConfig: link.PinnedTLS(cred.Fingerprint, cred.Host())})
	if err != nil {
		t.Fatalf("dial rabbitmq as %s: %v", user, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Reset gives the next test the mesh as declared and empty: every stream
// is deleted (a stream cannot be purged), the definitions are imported
// again (restoring what a test deleted, the streams and their bindings
// among it) and every other queue they declare is purged. The modules of
// the last test must be closed.
func (b *Broker) Reset(ctx context.Context, t testing.TB) {
	t.Helper()
	// The controller has a user in each virtual host.
	admins := map[string]string{wire.AMQPVhost: wire.ControllerMeshUser, wire.AMQPControlVhost: wire.ControllerUser}
	chans := map[string]*amqp.Channel{}
	for vhost, user := range admins {
		ch, err := b.Dial(t, user).Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		chans[vhost] = ch
	}
	isStream := func(q amqpdefs.Queue) bool { return q.Arguments[wire.ArgQueueType] == wire.QueueStream }
	for _, q := range b.Definitions.Queues {
		if isStream(q) {
			if _, err := chans[q.Vhost].QueueDelete(q.Name, false, false, false); err != nil {
				t.Fatalf("delete stream %s in %s: %v", q.Name, q.Vhost, err)
			}
		}
	}
	b.importDefinitions(ctx, t)
	for _, q := range b.Definitions.Queues {
		if isStream(q) {
			continue
		}
		if _, err := chans[q.Vhost].QueuePurge(q.Name, false); err != nil {
			t.Fatalf("purge %s in %s: %v", q.Name, q.Vhost, err)
		}
	}
}

// Inspect reads a queue's ready messages and consumers through conn (a
// passive declare, answered by the queue itself).
func (b *Broker) Inspect(t testing.TB, conn *amqp.Connection, queue string) amqp.Queue {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q
}

func logs(t testing.TB, c *rabbitmq.RabbitMQContainer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Logs(ctx)
	if err != nil {
		t.Logf("rabbitmq logs: %v", err)
		return
	}
	defer r.Close()
	out, _ := io.ReadAll(r)
	t.Logf("rabbitmq logs:\n%s", out)
}

// Queues lists the queues of the mesh's virtual host.
func (b *Broker) Queues(ctx context.Context, t testing.TB) []string {
	t.Helper()
	return b.QueuesIn(ctx, t, wire.AMQPVhost)
}

// QueuesIn lists the queues of virtual host vhost.
func (b *Broker) QueuesIn(ctx context.Context, t testing.TB, vhost string) []string {
	t.Helper()
	var list []struct {
		Name string `json:"name"`
	}
	doc, err := b.Container.ListQueues(ctx, vhost, "name")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatalf("list_queues: %v\n%s", err, doc)
	}
	var out []string
	for _, q := range list {
		out = append(out, q.Name)
	}
	return out
}

// Unacked is the number of deliveries user's channels hold unsettled.
// It is read from the channels, which count them as they go; a quorum
// queue's own counts (list_queues) are refreshed on its tick only, and
// AMQP tells ready messages alone (Inspect).
func (b *Broker) Unacked(ctx context.Context, t testing.TB, user string) int {
	t.Helper()
	var list []struct {
		User    string `json:"user"`
		Unacked int    `json:"messages_unacknowledged"`
	}
	b.ctlJSON(ctx, t, &list, "list_channels", "-q", "--formatter", "json", "user", "messages_unacknowledged")
	n := 0
	for _, c := range list {
		if c.User == user {
			n += c.Unacked
		}
	}
	return n
}

func (b *Broker) ctlJSON(ctx context.Context, t testing.TB, v any, args ...string) {
	t.Helper()
	out, err := b.Container.Ctl(ctx, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
}

// StartBare runs a broker with no mesh on it, only what opts give it
// (rabbitmq.WithUser, WithVhost, WithPermissions …), its plain AMQP port
// on this host's loopback: a broker as a predecessor's client knows it.
// It is removed when t ends.
func StartBare(t testing.TB, opts ...testcontainers.ContainerCustomizer) *rabbitmq.RabbitMQContainer {
	t.Helper()
	ctx, cancel, image, labels := prepare(t)
	defer cancel()
	ctr, err := rabbitmq.Run(ctx, image, append([]testcontainers.ContainerCustomizer{testcontainers.WithLabels(labels)}, opts...)...)
	return kept(t, ctr, err)
}

// kept is what rabbitmq.Run gave, removed when t ends (its logs in the
// test's output first, if it failed); a failed Run fails t.
func kept(t testing.TB, ctr *rabbitmq.RabbitMQContainer, err error) *rabbitmq.RabbitMQContainer {
	t.Helper()
	if ctr != nil {
		t.Cleanup(func() {
			if t.Failed() {
				logs(t, ctr)
			}
			if err := testcontainers.TerminateContainer(ctr); err != nil {
				t.Errorf("remove the rabbitmq container: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("run rabbitmq: %v", err)
	}
	return ctr
}
