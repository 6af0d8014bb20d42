package rollout

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// AMQPOptions say how the broker of the AMQP bus is reached.
type AMQPOptions struct {
	// Names are the broker's certificate names: what its clients dial.
	Names []string
	// MaxDeliver is the deliveries an event gets before it is dead-lettered
	// (amqpdefs.Inputs.MaxDeliver); amqpdefs.DefaultMaxDeliver when 0.
	MaxDeliver int
	// Now dates the broker's certificate; default time.Now.
	Now func() time.Time
}

// AMQPBroker is what the controller mints for the AMQP bus: the broker's
// certificate from the mesh's authority, and a password per principal
// with the definitions that carry their hashes and grants.
type AMQPBroker struct {
	CertPEM, KeyPEM []byte
	// Fingerprint is the broker certificate's, pinned by every credential.
	Fingerprint string
	// Definitions are the broker's users, grants and topology; Document is
	// them rendered, as the broker imports them.
	Definitions amqpdefs.Definitions
	Document    []byte
	// Users are the principals of the mesh's virtual host, in
	// amqpdefs.Users's order; ControlUsers the control plane's
	// (amqpdefs.ControlUsers), whose credentials name its virtual host.
	Users, ControlUsers []string

	passwords map[string]string
	mesh      *meshdesc.Mesh
}

// MintAMQP mints the AMQP bus of m, its certificate issued by ca. Every
// password is new: importing the definitions into a broker that holds
// older ones replaces them, and the older credentials stop working.
func MintAMQP(m *meshdesc.Mesh, ca *pki.CA, o AMQPOptions) (AMQPBroker, error) {
	if len(o.Names) == 0 {
		return AMQPBroker{}, errors.New("mint the AMQP bus: the broker has no name to be dialled by")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := AMQPBroker{Users: amqpdefs.Users(m), ControlUsers: amqpdefs.ControlUsers(m), passwords: map[string]string{}, mesh: m}
	var err error
	if b.CertPEM, b.KeyPEM, err = ca.IssueServer(o.Names, o.Now()); err != nil {
		return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
	}
	if b.Fingerprint, err = pki.Fingerprint(b.CertPEM); err != nil {
		return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
	}
	hashes := map[string]string{}
	for _, u := range slices.Concat(b.Users, b.ControlUsers) {
		raw := make([]byte, passwordBytes)
		if _, err := rand.Read(raw); err != nil {
			return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: password: %w", err)
		}
		// URL-safe: the password travels in the credential's URL.
		b.passwords[u] = base64.RawURLEncoding.EncodeToString(raw)
		if hashes[u], err = amqpdefs.NewPasswordHash(b.passwords[u]); err != nil {
			return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
		}
	}
	in := amqpdefs.Inputs{Hashes: hashes, MaxDeliver: o.MaxDeliver}
	if b.Definitions, err = amqpdefs.Build(m, in); err != nil {
		return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
	}
	if b.Document, err = amqpdefs.Render(m, in); err != nil {
		return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
	}
	return b, nil
}

// Credential is user's credential for the broker at addr (host:port). A
// host's lacks its declaration key, which is the store's to add.
func (b AMQPBroker) Credential(user, addr string) (wire.Credential, error) {
	pw, ok := b.passwords[user]
	if !ok {
		return wire.Credential{}, fmt.Errorf("no AMQP principal %q (the principals are: %v)", user, slices.Concat(b.Users, b.ControlUsers))
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return wire.Credential{}, fmt.Errorf("AMQP broker address %q: %w", addr, err)
	}
	c := wire.Credential{URL: wire.AMQPBusURL(user, pw, addr), Fingerprint: b.Fingerprint}
	if slices.Contains(b.ControlUsers, user) {
		c.URL = wire.AMQPControlURL(user, pw, addr)
	}
	switch {
	case user == wire.ControllerUser || user == wire.ControllerMeshUser:
		c.Principal = wire.PrincipalController
	case user == wire.BuilderUser:
		c.Principal = wire.PrincipalBuilder
	default:
		if pl, ok := b.placement(user); ok {
			c.Node, c.Module = pl.Node, pl.Module.Name
		} else if p, ok := b.person(user); ok {
			c.Principal, c.Name = wire.PrincipalPerson, p.Name
		} else if node, ok := strings.CutPrefix(user, wire.HostUser("")); ok {
			c.Principal, c.Node = wire.PrincipalHost, node
		} else if token, ok := strings.CutPrefix(user, wire.EnrolUser("")); ok {
			c.Principal, c.Name = wire.PrincipalEnrol, token
		} else if repo, ok := strings.CutPrefix(user, wire.SourceUser("")); ok {
			c.Principal, c.Name = wire.PrincipalSource, repo
		}
	}
	return c, nil
}

func (b AMQPBroker) placement(user string) (meshdesc.Placement, bool) {
	pls := b.mesh.Placements()
	i := slices.IndexFunc(pls, func(pl meshdesc.Placement) bool { return wire.AMQPUser(pl.Node, pl.Module.Name) == user })
	if i < 0 {
		return meshdesc.Placement{}, false
	}
	return pls[i], true
}

func (b AMQPBroker) person(user string) (meshdesc.Person, bool) {
	i := slices.IndexFunc(b.mesh.Persons, func(p meshdesc.Person) bool { return wire.PersonUser(p.Name) == user })
	if i < 0 {
		return meshdesc.Person{}, false
	}
	return b.mesh.Persons[i], true
}

// WriteAMQP mints the AMQP bus of m from the authority in st and writes it
// into dir's amqp/ (Layout.AMQP): what the broker reads (its certificate,
// key and definitions) and every principal's credential for addr, those
// of the control plane's virtual host (ControlUsers) among them. The
// whole directory is built aside and renamed into place, so a reader sees
// the old bus or the new one, never a mix; a crash between the two renames
// leaves the old one aside and no amqp/, and the next WriteAMQP mints
// anew. One WriteAMQP runs at a time on a directory.
//
// The AMQP bus is the mesh's predecessor bus (design 25 §1): its
// passwords live only here, beside the broker's files, not in the store
// the NATS bus's secrets are in; each WriteAMQP rotates them all.
func WriteAMQP(ctx context.Context, m *meshdesc.Mesh, st store.Reader, dir, addr string, o AMQPOptions) (AMQPBroker, error) {
	if bus, err := MeshBus(ctx, st); err == nil && bus == AMQP {
		return AMQPBroker{}, fmt.Errorf("%w: the mesh is on AMQP, its broker's users and grants are the controller's (genesis --bus amqp); amqp mints a bus beside a mesh on NATS", ErrUnfit)
	}
	ca, err := st.Authority(ctx)
	if err != nil {
		return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: %w", err)
	}
	b, err := MintAMQP(m, ca, o)
	if err != nil {
		return AMQPBroker{}, err
	}
	l := statedir.Layout{Dir: dir}
	// What a WriteAMQP killed mid-way left aside holds passwords.
	stale, _ := filepath.Glob(filepath.Join(dir, statedir.AMQPTemp+"*"))
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return AMQPBroker{}, fmt.Errorf("remove the leftovers of an interrupted AMQP mint: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(dir, statedir.AMQPTemp)
	if err != nil {
		return AMQPBroker{}, fmt.Errorf("write the AMQP bus: %w", err)
	}
	defer os.RemoveAll(tmp)
	t := statedir.Layout{Dir: tmp}
	if err := os.MkdirAll(filepath.Dir(t.AMQPCredential("x")), 0o700); err != nil {
		return AMQPBroker{}, fmt.Errorf("write the AMQP bus: %w", err)
	}
	// Whoever starts the broker hands it these files; the key and the
	// hashes are for nobody else on this machine.
	files := []fileWrite{
		{path: t.AMQPCert(), data: b.CertPEM, perm: 0o644},
		{path: t.AMQPKey(), data: b.KeyPEM, perm: 0o600},
		{path: t.AMQPDefinitions(), data: b.Document, perm: 0o600},
	}
	// The control plane's users too (amqpdefs.ControlUsers), in the same
	// layout: a user's name says its virtual host, and no name is in both.
	// A host's credential carries the key its declarations are checked
	// with, as on NATS (mint.go); it is the store's.
	var declKey string
	if len(m.Nodes) > 0 {
		key, err := st.DeclarationKey(ctx)
		if err != nil {
			return AMQPBroker{}, fmt.Errorf("mint the AMQP bus: the hosts' declaration key: %w", err)
		}
		declKey = wire.EncodeDeclarationKey(key.Public().(ed25519.PublicKey))
	}
	for _, u := range slices.Concat(b.Users, b.ControlUsers) {
		c, err := b.Credential(u, addr)
		if err != nil {
			return AMQPBroker{}, err
		}
		if c.Principal == wire.PrincipalHost {
			c.DeclarationKey = declKey
		}
		files = append(files, fileWrite{path: t.AMQPCredential(u), data: c.Marshal(), perm: 0o600})
	}
	for _, f := range files {
		if err := statedir.WriteSynced(f.path, f.data, f.perm); err != nil {
			return AMQPBroker{}, fmt.Errorf("write the AMQP bus: %w", err)
		}
	}
	for _, d := range []string{filepath.Dir(t.AMQPCredential("x")), t.AMQP()} {
		if err := atomicfile.SyncDir(d); err != nil {
			return AMQPBroker{}, fmt.Errorf("write the AMQP bus: %w", err)
		}
	}
	old := filepath.Join(tmp, "old")
	if err := os.Rename(l.AMQP(), old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return AMQPBroker{}, fmt.Errorf("move the old AMQP bus aside: %w", err)
	}
	if err := os.Rename(t.AMQP(), l.AMQP()); err != nil {
		return AMQPBroker{}, fmt.Errorf("move the AMQP bus into place: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return AMQPBroker{}, fmt.Errorf("move the AMQP bus into place: %w", err)
	}
	return b, nil
}
