package rollout

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bus is a bus the mesh's own traffic can be on.
type Bus string

// The buses.
const (
	// NATS is the bus the mesh moves to: nats.conf composed and reloaded.
	NATS Bus = "nats"
	// AMQP is the bus the mesh has today (design 25 §1): RabbitMQ, its
	// users and grants made live through the management API.
	AMQP Bus = "amqp"
)

// ParseBus reads a bus's name, as --bus takes it.
func ParseBus(s string) (Bus, error) {
	switch b := Bus(s); b {
	case NATS, AMQP:
		return b, nil
	}
	return "", fmt.Errorf("bus %q: expected %s or %s", s, NATS, AMQP)
}

// MeshBus is the bus the store says the mesh's own traffic is on: the
// one its controller's credential names. Genesis chooses it (Options.Bus)
// and every credential minted after follows it; the description only
// says which servers stand.
func MeshBus(ctx context.Context, st store.Reader) (Bus, error) {
	data, err := st.Credential(ctx, wire.ControllerUser)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: no controller credential, so no bus", store.ErrNoGenesis)
	}
	if err != nil {
		return "", fmt.Errorf("which bus the mesh is on: %w", err)
	}
	c, err := wire.ParseCredential(data)
	if err != nil {
		return "", fmt.Errorf("which bus the mesh is on: the controller's credential: %w", err)
	}
	switch c.Scheme() {
	case "tls", "nats":
		return NATS, nil
	case "amqps", "amqp":
		return AMQP, nil
	}
	return "", fmt.Errorf("which bus the mesh is on: the controller's credential names scheme %q", c.Scheme())
}

// target is where the credentials a composition writes point: the bus,
// the address they dial and the certificate they pin.
type target struct {
	bus         Bus
	addr        string
	fingerprint string
	// controlUsers are the users of the control plane's virtual host on
	// AMQP, whose URLs name it.
	controlUsers []string
}

// targetOf is the target of a mesh on bus: its server's certificate, read
// from dir, must carry every name the description gives the server, since
// a composition does not re-issue it (that would change the fingerprint
// every credential pins).
func targetOf(m *meshdesc.Mesh, bus Bus, dir string) (target, error) {
	l := statedir.Layout{Dir: dir}
	path, names, field, addr := l.ServerCert(), m.Bus.Names, "bus.names", ""
	if len(m.Bus.Names) > 0 {
		addr = link.HostPort(m.Bus.Names[0], m.Bus.Port)
	}
	if bus == AMQP {
		if m.AMQP == nil {
			return target{}, fmt.Errorf("%w: the mesh is on AMQP, and the description names no broker (amqp:)", ErrUnfit)
		}
		path, names, field = l.AMQPCert(), m.AMQP.Names, "amqp.names"
		addr = net.JoinHostPort(m.AMQP.Names[0], strconv.Itoa(m.AMQP.Port))
	}
	certPEM, err := os.ReadFile(path)
	if err != nil {
		return target{}, fmt.Errorf("%w: %v", store.ErrNoGenesis, err)
	}
	if err := checkCertNames(certPEM, names, field); err != nil {
		return target{}, err
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		return target{}, err
	}
	return target{bus: bus, addr: addr, fingerprint: fp, controlUsers: amqpdefs.ControlUsers(m)}, nil
}

// CredentialDoc is p's credential document on the mesh's bus (MeshBus),
// whose server's certificate is in dir: what an enrolment seals to its
// node.
func CredentialDoc(ctx context.Context, st store.Reader, m *meshdesc.Mesh, dir string, p compose.Principal, sec store.Secret, declKey ed25519.PrivateKey) ([]byte, error) {
	bus, err := MeshBus(ctx, st)
	if err != nil {
		return nil, err
	}
	t, err := targetOf(m, bus, dir)
	if err != nil {
		return nil, err
	}
	return t.credentialDoc(p, sec, declKey)
}

// credentialDoc is a principal's credential document, checked before it
// is written: the server's address, the pinned fingerprint, and for a
// host the public half of the key declarations are signed with.
func (t target) credentialDoc(p compose.Principal, sec store.Secret, declKey ed25519.PrivateKey) ([]byte, error) {
	c := p.Credential()
	switch {
	case t.bus == AMQP && slices.Contains(t.controlUsers, p.User):
		c.URL = wire.AMQPControlURL(p.User, sec.Password, t.addr)
	case t.bus == AMQP:
		c.URL = wire.AMQPBusURL(p.User, sec.Password, t.addr)
	default:
		c.URL = wire.BusURL(p.User, sec.Password, t.addr)
	}
	c.Fingerprint = t.fingerprint
	if c.Principal == wire.PrincipalHost {
		c.DeclarationKey = wire.EncodeDeclarationKey(declKey.Public().(ed25519.PublicKey))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("credential of %s: %w", p.User, err)
	}
	return c.Marshal(), nil
}

// AMQPAdmin makes the broker's users and grants desired, as the
// administrator user with password, through the management API at
// endpoint (amqpadmin.Admin's Apply), and says what it changed. The
// controller's binary gives it; without it a mesh on AMQP cannot be
// composed.
type AMQPAdmin func(ctx context.Context, endpoint, user, password string, desired amqpdefs.Definitions) (changed string, err error)

// ErrNotLive is wrapped by a composition committed to the store that the
// broker has not taken yet (its management API did not answer, or
// refused): the store says what to make live, and the next composition,
// or LiveAMQP, makes it so.
var ErrNotLive = errors.New("composed, but not live on the broker yet")

// amqpDefinitions are the definitions of m (its tokens and persons
// included) with the principals' passwords hashed for RabbitMQ: one
// secret per principal serves both buses (amqpdefs.PasswordHash).
func amqpDefinitions(m *meshdesc.Mesh, secrets store.Secrets) (amqpdefs.Definitions, error) {
	hashes := map[string]string{}
	for _, u := range slices.Concat(amqpdefs.Users(m), amqpdefs.ControlUsers(m)) {
		sec, ok := secrets[u]
		if !ok {
			return amqpdefs.Definitions{}, fmt.Errorf("AMQP definitions: no secret for %s", u)
		}
		hashes[u] = amqpdefs.PasswordHash(sec.Password)
	}
	return amqpdefs.Build(m, amqpdefs.Inputs{Hashes: hashes})
}

// bootDefinitions are what the broker imports when it first starts: the
// mesh's definitions and the controller's administrator, who changes
// them from then on. The administrator holds every grant in the mesh's
// virtual hosts, which the management API asks of whoever declares a
// queue there (a token's answer queue, a new node's); it adds nothing to
// what an administrator can grant itself.
func bootDefinitions(m *meshdesc.Mesh, secrets store.Secrets) ([]byte, error) {
	d, err := amqpDefinitions(m, secrets)
	if err != nil {
		return nil, err
	}
	admin, ok := secrets[wire.AMQPAdminUser]
	if !ok {
		return nil, fmt.Errorf("AMQP definitions: no secret for the administrator %s", wire.AMQPAdminUser)
	}
	d.Users = append(d.Users, amqpdefs.User{
		Name: wire.AMQPAdminUser, PasswordHash: amqpdefs.PasswordHash(admin.Password),
		HashingAlgorithm: amqpdefs.HashingAlgorithm, Tags: wire.AMQPAdministratorTag,
	})
	for _, v := range d.Vhosts {
		d.Permissions = append(d.Permissions, amqpdefs.Permission{User: wire.AMQPAdminUser, Vhost: v.Name, Configure: ".*", Write: ".*", Read: ".*"})
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render the broker's definitions: %w", err)
	}
	return append(b, '\n'), nil
}

// makeLive applies desired on the broker of m as the administrator whose
// secret is in secrets.
func makeLive(ctx context.Context, m *meshdesc.Mesh, secrets store.Secrets, desired amqpdefs.Definitions, o Options) error {
	if o.AMQPAdmin == nil {
		return fmt.Errorf("%w: this program cannot reach the broker's management API (no AMQPAdmin)", ErrNotLive)
	}
	if m.AMQP == nil {
		return fmt.Errorf("%w: the description names no broker (amqp:)", ErrNotLive)
	}
	admin, ok := secrets[wire.AMQPAdminUser]
	if !ok {
		return fmt.Errorf("%w: the store holds no secret of the broker's administrator %s", ErrNotLive, wire.AMQPAdminUser)
	}
	endpoint := "http://" + net.JoinHostPort(m.AMQP.Management, strconv.Itoa(m.AMQP.ManagementPort))
	changed, err := o.AMQPAdmin(ctx, endpoint, wire.AMQPAdminUser, admin.Password, desired)
	if err != nil {
		// The address and the user are named here, whatever the caller
		// of the API put in its error; the password never is.
		return fmt.Errorf("%w: the management API at %s as %s: %w", ErrNotLive, endpoint, wire.AMQPAdminUser, err)
	}
	o.Logger.Info("broker applied", "endpoint", endpoint, "changes", changed)
	return nil
}

// LiveAMQP makes what the store holds live on the broker of a mesh on
// AMQP, without composing anything new: what a composition committed and
// could not make live (ErrNotLive), the controller makes live so, every
// LiveEvery. On a mesh on NATS it does nothing (nats.conf is written with
// the composition, and the server's watcher reloads it).
func LiveAMQP(ctx context.Context, m *meshdesc.Mesh, st store.Reader, o Options) error {
	o = o.WithDefaults()
	bus, err := MeshBus(ctx, st)
	if err != nil || bus != AMQP {
		return err
	}
	m, err = Described(ctx, m, st)
	if err != nil {
		return err
	}
	full, secrets, err := composedMesh(ctx, st, m, o)
	if err != nil {
		return err
	}
	desired, err := amqpDefinitions(full, secrets)
	if err != nil {
		return err
	}
	return makeLive(ctx, full, secrets, desired, o)
}

// LiveEvery is how often a controller on AMQP makes the store's users
// and grants live on the broker again (LiveAMQP).
const LiveEvery = 30 * time.Second

// composedMesh is m with the store's tokens and persons, and the store's
// secrets: what a composition composes.
func composedMesh(ctx context.Context, st store.Reader, m *meshdesc.Mesh, o Options) (*meshdesc.Mesh, store.Secrets, error) {
	secrets, err := st.Secrets(ctx)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := st.Tokens(ctx)
	if err != nil {
		return nil, nil, err
	}
	m = withTokens(m, tokens, o.Now(), o.SpentTokenGrace)
	persons, err := st.Persons(ctx)
	if err != nil {
		return nil, nil, err
	}
	if m, err = withPersons(m, persons); err != nil {
		return nil, nil, err
	}
	return m, secrets, nil
}
