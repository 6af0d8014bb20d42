package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	dockernet "github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
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

	// amqpObserver is the harness's own user on the broker, in the
	// virtual host "/" where no principal of the mesh has a grant: it
	// keeps the broker's record of connections (rabbitmq.KeepEvents) in
	// amqpObserverQueue, and may do nothing else.
	amqpObserver      = "harness.observer"
	amqpObserverQueue = "harness.connections"
)

// AMQPBus is the RabbitMQ broker of a cluster and the AMQP credentials of
// the mesh's principals, the control plane's among them.
type AMQPBus struct {
	creds map[string]wire.Credential
	// store holds the credentials of a mesh on AMQP (the controller's
	// store); nil beside a mesh on NATS, whose AMQP ones are creds.
	store interface {
		Credential(ctx context.Context, user string) (wire.Credential, error)
	}
	ctr *rabbitmq.RabbitMQContainer
	// fingerprint is the broker certificate's, which the observer pins.
	fingerprint string

	// observerPassword is the firehose observer's, once it was added
	// (Observe).
	observerMu       sync.Mutex
	observerPassword string

	// events is the broker's record of connections, kept since it was
	// raised; eventsErr says why there is none.
	events    *rabbitmq.EventLog
	eventsErr error
}

// ConnectionEvents are the broker's events about connections and logins
// since it was raised (rabbitmq.ConnectionEventKeys), oldest first: its own
// record of every connection made to it, closed and refused ones too,
// which Connections no longer lists (observe.AMQPConnectionsEver reads
// them).
func (a *AMQPBus) ConnectionEvents(ctx context.Context) ([]rabbitmq.Event, error) {
	if a.events == nil {
		return nil, fmt.Errorf("the AMQP broker's record of connections is not kept: %w", a.eventsErr)
	}
	return a.events.Events(ctx)
}

// Address is host:port where the broker's TLS listener is reached from
// this host (a port published on the loopback). A credential names the
// broker as the private network knows it, which is also the name its
// certificate is checked against: dial here, check that name.
func (a *AMQPBus) Address(ctx context.Context) (string, error) {
	p, err := a.ctr.MappedPort(ctx, amqpTLSPort+"/tcp")
	if err != nil {
		return "", infra("the AMQP broker's published port", err)
	}
	return net.JoinHostPort("127.0.0.1", p.Port()), nil
}

// Queues are the names of the queues the broker has in virtual host
// vhost, by its own account.
func (a *AMQPBus) Queues(ctx context.Context, vhost string) ([]string, error) {
	var list []struct {
		Name string `json:"name"`
	}
	doc, err := a.ctr.ListQueues(ctx, vhost, "name")
	if err != nil {
		return nil, fmt.Errorf("ask the AMQP broker for its queues in %s: %w", vhost, err)
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		return nil, fmt.Errorf("the AMQP broker's queues in %s: %w\n%s", vhost, err, doc)
	}
	out := make([]string, 0, len(list))
	for _, q := range list {
		out = append(out, q.Name)
	}
	slices.Sort(out)
	return out, nil
}

// Connections are the broker's open connections with columns, as
// rabbitmqctl lists them in JSON (observe.AMQPConnections reads them).
func (a *AMQPBus) Connections(ctx context.Context, columns ...string) ([]byte, error) {
	out, err := a.ctr.Ctl(ctx, append([]string{"list_connections", "-q", "--formatter", "json"}, columns...)...)
	if err != nil {
		return nil, fmt.Errorf("ask the AMQP broker for its connections: %w", err)
	}
	return []byte(out), nil
}

// ListQueues are the queues of virtual host vhost with columns, as
// rabbitmqctl lists them in JSON (observe.AMQPQueues reads them): the
// broker's own counts (rabbitmq.RabbitMQContainer.ListQueues).
func (a *AMQPBus) ListQueues(ctx context.Context, vhost string, columns ...string) ([]byte, error) {
	out, err := a.ctr.ListQueues(ctx, vhost, columns...)
	if err != nil {
		return nil, fmt.Errorf("ask the AMQP broker for its queues in %s: %w", vhost, err)
	}
	return out, nil
}

// Observe watches the control plane's firehose from outside, until the
// trace returned is closed: the broker's own copy of every publish and
// every delivery in wire.AMQPControlVhost from now on
// (observe.AMQPTrace). It adds the observer (wire.AMQPObserverUser, the
// harness's, no principal of the mesh: it reads its own queues and the
// firehose alone) the first time, as the broker's administrator, and
// turns tracing on; closing the trace turns it off. Nothing is asked of the
// controller's store, which a scenario may have stopped.
func (a *AMQPBus) Observe(ctx context.Context) (*observe.AMQPTrace, error) {
	password, err := a.observer(ctx)
	if err != nil {
		return nil, err
	}
	addr, err := a.Address(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.ctr.SetTracing(ctx, wire.AMQPControlVhost, true); err != nil {
		return nil, fmt.Errorf("turn the control plane's firehose on: %w", err)
	}
	traceOff := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := a.ctr.SetTracing(ctx, wire.AMQPControlVhost, false); err != nil {
			return fmt.Errorf("turn the control plane's firehose off: %w", err)
		}
		return nil
	}
	cred := observe.AMQPObserverCredential(password, net.JoinHostPort(AliasAMQP, amqpTLSPort), a.fingerprint)
	t, err := observe.WatchAMQPTrace(ctx, cred, addr)
	if err != nil {
		return nil, errors.Join(err, traceOff())
	}
	t.OnClose(traceOff)
	return t, nil
}

// observer adds the firehose's observer once, and returns its password.
func (a *AMQPBus) observer(ctx context.Context) (string, error) {
	a.observerMu.Lock()
	defer a.observerMu.Unlock()
	if a.observerPassword != "" {
		return a.observerPassword, nil
	}
	password := rand.Text()
	if err := observe.AddAMQPObserver(ctx, a.ctr, password); err != nil {
		return "", fmt.Errorf("the AMQP broker: %w", err)
	}
	a.observerPassword = password
	return password, nil
}

// BindingKeys are the routing keys of the bindings from exchange in
// virtual host vhost, by the broker's own account.
func (a *AMQPBus) BindingKeys(ctx context.Context, vhost, exchange string) ([]string, error) {
	var list []struct {
		Source string `json:"source_name"`
		Key    string `json:"routing_key"`
	}
	doc, err := a.ctr.ListBindings(ctx, vhost, "source_name", "routing_key")
	if err != nil {
		return nil, fmt.Errorf("ask the AMQP broker for its bindings in %s: %w", vhost, err)
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		return nil, fmt.Errorf("the AMQP broker's bindings in %s: %w\n%s", vhost, err, doc)
	}
	var out []string
	for _, b := range list {
		if b.Source == exchange {
			out = append(out, b.Key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Credential is user's credential on the AMQP bus, its URL naming the
// broker as the private network knows it.
func (a *AMQPBus) Credential(user string) (wire.Credential, error) {
	if a.store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return a.store.Credential(ctx, user)
	}
	c, ok := a.creds[user]
	if !ok {
		return wire.Credential{}, fmt.Errorf("no AMQP credential for %q", user)
	}
	return c, nil
}

// RaiseAMQP starts RabbitMQ on the private network with TLS (a server
// certificate from the cluster's own authority) and the definitions
// composed from the cluster's description: those genesis wrote when the
// mesh is on AMQP (topology.BusAMQP), else those `mesh-controller amqp`
// mints beside a mesh on NATS, with every principal's AMQP credential. A
// broker raised already is returned as it is. The image is built from
// Debian's packages when it is missing (MESH_RABBITMQ_IMAGE names
// another).
func (c *Cluster) RaiseAMQP(ctx context.Context) (AMQPBroker, error) {
	if !slices.ContainsFunc(c.topology.Members, func(m topology.Member) bool { return m.Kind == topology.KindRabbitMQ }) {
		return nil, fmt.Errorf("raise the AMQP bus: %w: this cluster's topology has no member of kind %s (it has: %s)",
			ErrUnknownMember, topology.KindRabbitMQ, strings.Join(c.topology.Names(), ", "))
	}
	c.mu.Lock()
	raised := c.amqp
	c.mu.Unlock()
	if raised != nil {
		return raised, nil
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

	// A mesh on AMQP starts its broker with what its genesis wrote; beside
	// a mesh on NATS, the controller mints the broker's certificate, the
	// passwords and the definitions, and every principal's credential,
	// into the state.
	onAMQP := c.topology.MeshBus() == topology.BusAMQP
	if !onAMQP {
		addr := AliasAMQP + ":" + amqpTLSPort
		out, exit, err := c.runController(ctx, "amqp", append(controllerctr.Args("amqp", filepath.Base(controllerctr.MeshFile)), "--addr", addr))
		if err != nil {
			return nil, err
		}
		if exit != 0 {
			return nil, fmt.Errorf("mesh-controller amqp exited %d:\n%s", exit, tail(out, tailLines))
		}
	}
	l := statedir.Layout{Dir: c.state}
	var certPEM, keyPEM, doc []byte
	for _, f := range []struct {
		path string
		into *[]byte
	}{{l.AMQPCert(), &certPEM}, {l.AMQPKey(), &keyPEM}, {l.AMQPDefinitions(), &doc}} {
		if *f.into, err = os.ReadFile(f.path); err != nil {
			return nil, fmt.Errorf("read what the controller minted for the broker: %w", err)
		}
	}
	clock.done("mint")

	q := regexp.QuoteMeta(amqpObserverQueue)
	var broker []rabbitmq.Option
	if c.topology.Has(topology.KindPredecessor) {
		// The predecessor's user and virtual host are the broker's
		// operator's, there before the mesh: the mesh neither mints nor
		// changes them (amqpadmin changes only the users it tagged). The
		// description names them, as its compatibility broker's clients.
		compat, ok := m.CompatBroker()
		if !ok || len(compat.Compat.Vhosts) == 0 {
			return nil, fmt.Errorf("raise the predecessor's client: the description declares no compatibility broker (a module with compat:) naming its user and virtual host")
		}
		c.predecessor = predecessorOf{user: compat.Compat.Users[0], vhost: compat.Compat.Vhosts[0], password: rand.Text()}
		broker = append(broker,
			rabbitmq.WithUser(c.predecessor.user, c.predecessor.password),
			rabbitmq.WithVhost(c.predecessor.vhost),
			rabbitmq.WithPermissions(c.predecessor.user, c.predecessor.vhost, ".*", ".*", ".*"),
		)
	}
	broker = append(broker,
		// The observer is the harness's, in the boot definitions, so it is
		// there before any principal of the mesh may log in; the
		// controller's live changes leave alone a user it did not tag
		// (amqpadmin).
		rabbitmq.WithUser(amqpObserver, rand.Text()),
		rabbitmq.WithPermissions(amqpObserver, rabbitmq.EventVhost, "^"+q+"$", "^"+q+"$",
			"^("+q+"|"+regexp.QuoteMeta(rabbitmq.EventExchange)+")$"),
		rabbitmq.WithConfig(
			"listeners.ssl.default = "+amqpTLSPort,
			"ssl_options.certfile = "+amqpCertFile,
			"ssl_options.keyfile = "+amqpKeyFile,
			// Clients pin the broker's certificate and log in with a
			// password; they present none.
			"ssl_options.verify = verify_none",
			"ssl_options.fail_if_no_peer_cert = false",
		),
	)
	files := func() []testcontainers.ContainerFile {
		return []testcontainers.ContainerFile{
			{Reader: bytes.NewReader(certPEM), ContainerFilePath: amqpCertFile, FileMode: 0o644},
			{Reader: bytes.NewReader(keyPEM), ContainerFilePath: amqpKeyFile, FileMode: 0o644},
			{Reader: bytes.NewReader(doc), ContainerFilePath: amqpDefinitions, FileMode: 0o644},
		}
	}
	ctr, err := c.recycledBroker(ctx, broker, files)
	if err != nil {
		return nil, err
	}
	if ctr != nil {
		clock.done("broker (recycled)")
	} else {
		if ctr, err = c.bootBroker(ctx, image, broker, files()); err != nil {
			return nil, err
		}
		clock.done("broker")
	}
	// The record of connections is kept from before the mesh's users
	// exist. A broker without the event exchange (an image named by
	// rabbitmq.EnvImage may lack the plugin) raises all the same; only
	// the steps that read the record fail, saying why.
	events, eventsErr := ctr.KeepEvents(ctx, amqpObserver, amqpObserverQueue, rabbitmq.ConnectionEventKeys...)
	if eventsErr != nil {
		c.s.narrate("the AMQP broker's record of connections is not kept: %v", eventsErr)
	}
	// The mesh's definitions go in beside the boot ones (the broker's
	// administrator); RabbitMQ merges them.
	if err := ctr.ImportDefinitions(ctx, doc, amqpDefinitions); err != nil {
		return nil, fmt.Errorf("import the mesh's AMQP definitions: %w", err)
	}
	clock.done("definitions")
	c.s.narrate("%s", clock.summary())

	fingerprint, err := pki.Fingerprint(certPEM)
	if err != nil {
		return nil, fmt.Errorf("the broker's certificate: %w", err)
	}
	bus := &AMQPBus{creds: map[string]wire.Credential{}, ctr: ctr, fingerprint: fingerprint, events: events, eventsErr: eventsErr}
	if onAMQP {
		// The credentials are the store's, as every principal's on the
		// mesh's bus.
		bus.store = c
		c.setAMQP(bus)
		return bus, nil
	}
	for _, u := range slices.Concat(amqpdefs.Users(m), amqpdefs.ControlUsers(m)) {
		data, err := os.ReadFile(l.AMQPCredential(u))
		if err != nil {
			return nil, fmt.Errorf("read %s's AMQP credential: %w", u, err)
		}
		if bus.creds[u], err = wire.ParseCredential(data); err != nil {
			return nil, fmt.Errorf("read %s's AMQP credential: %w", u, err)
		}
	}
	c.setAMQP(bus)
	return bus, nil
}

// bootBroker boots the cluster's broker with opts and files, on the
// private network as AliasAMQP. With the run's pool, the broker is the
// pool's (its name and labels), and the session hands it back at its
// Close.
func (c *Cluster) bootBroker(ctx context.Context, image string, broker []rabbitmq.Option, files []testcontainers.ContainerFile) (*rabbitmq.RabbitMQContainer, error) {
	name, pooled := c.pooledOpts(RoleAMQP)
	opts := append(c.s.common(RoleAMQP), pooled...)
	for _, o := range broker {
		opts = append(opts, o)
	}
	opts = append(opts,
		testcontainers.WithFiles(files...),
		network.WithNetworkName([]string{AliasAMQP}, c.networks[Private]),
		// The TLS listener is published on this host's loopback too, for
		// the steps, which observe the broker as its principals do; so is
		// the management API, for the witness, which reads it as the
		// harness's administrator.
		testcontainers.WithExposedPorts(amqpTLSPort+"/tcp", rabbitmq.ManagementPort),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings[dockernet.MustParsePort(amqpTLSPort+"/tcp")] = []dockernet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1")}}
			hc.PortBindings[dockernet.MustParsePort(rabbitmq.ManagementPort)] = []dockernet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1")}}
		}),
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
	if ctr != nil {
		c.keepPooled(ctx, RoleAMQP, name, ctr, h, err)
	}
	if h != nil {
		c.setRole(RoleAMQP, h)
	}
	if err != nil {
		return nil, err
	}
	return ctr, nil
}

// recycledBroker is a broker of the run's pool, connected to the private
// network as AliasAMQP and started with opts and files (rabbitmq.Reuse),
// or nil when the pool has none to give.
func (c *Cluster) recycledBroker(ctx context.Context, broker []rabbitmq.Option, files func() []testcontainers.ContainerFile) (*rabbitmq.RabbitMQContainer, error) {
	m, err := c.leaseRecycled(ctx, RoleAMQP, AliasAMQP, "", 0, func(m recyclable) error {
		return m.(*rabbitmq.RabbitMQContainer).Reuse(ctx, files(), broker...)
	})
	if m == nil || err != nil {
		return nil, err
	}
	return m.(*rabbitmq.RabbitMQContainer), nil
}

func (c *Cluster) setAMQP(bus *AMQPBus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.amqp = bus
}

// ImageID is the id of the image ref names.
func (c *Cluster) ImageID(ctx context.Context, ref string) (string, error) {
	res, err := c.s.docker.ImageInspect(ctx, ref)
	if err != nil {
		return "", infra("inspect image "+ref, err)
	}
	return res.ID, nil
}
