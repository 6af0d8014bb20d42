package rollout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// GenesisResult says what genesis minted.
type GenesisResult struct {
	// Users are the principals' user names, in compose order.
	Users []string `json:"users"`
	// Fingerprint is the certificate's every credential pins: the NATS
	// server's, or on a mesh on AMQP the broker's.
	Fingerprint string `json:"fingerprint"`
	// Bus is the bus the mesh's own traffic is on.
	Bus Bus `json:"bus"`
}

// serverFiles are what the nats container reads: they stay files in the
// state directory's nats/, whichever store holds the rest. On a mesh on
// AMQP, the broker's are beside them in amqp/.
type serverFiles struct {
	cert, key, conf []byte
	amqp            *brokerFiles
}

// brokerFiles are what the broker reads when it first starts: its
// certificate and key, and the definitions it imports.
type brokerFiles struct{ cert, key, definitions []byte }

// Genesis raises a mesh's state from nothing: the authority and the server
// certificate for every bus name, a minted password per principal, the
// composed nats.conf and each principal's credential. Everything is built
// in memory first. The server's files are written into dir's nats/
// through a temporary directory and a rename, then the rest goes into the
// store in one Create, whose success marks the genesis complete: a failure
// leaves no partial genesis. A store that already holds one, or a nats/
// without a genesis in the store, is refused with store.ErrGenesisExists.
func Genesis(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, o Options) (GenesisResult, error) {
	o = o.WithDefaults()
	l := statedir.Layout{Dir: dir}
	if _, err := st.Secrets(ctx); err == nil {
		return GenesisResult{}, fmt.Errorf("%w: the store holds its secrets; use apply to change an existing mesh", store.ErrGenesisExists)
	} else if !errors.Is(err, store.ErrNoGenesis) {
		return GenesisResult{}, fmt.Errorf("inspect the store: %w", err)
	}
	for _, d := range []string{l.NATS(), l.AMQP()} {
		if _, err := os.Stat(d); err == nil {
			return GenesisResult{}, fmt.Errorf("%w: %s exists, but the store holds no genesis (the leftovers of an interrupted genesis?); remove it or use another directory",
				store.ErrGenesisExists, d)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return GenesisResult{}, fmt.Errorf("inspect state directory: %w", err)
		}
	}
	state, server, res, err := genesisState(m, o)
	if err != nil {
		return GenesisResult{}, err
	}
	if err := statedir.MakeDir(dir, o.syncDir); err != nil {
		return GenesisResult{}, err
	}
	if err := statedir.RemoveGenesisLeftovers(dir); err != nil {
		return GenesisResult{}, err
	}
	if err := writeServerFiles(l, server, o.syncDir); err != nil {
		return GenesisResult{}, err
	}
	if err := st.Create(ctx, state); err != nil {
		// The nats/ just written would be taken for leftovers by the next
		// genesis: remove it, unless the store says the genesis is there
		// after all (a commit whose last step reported an error).
		if _, readErr := st.Secrets(context.WithoutCancel(ctx)); errors.Is(readErr, store.ErrNoGenesis) {
			for _, d := range []string{l.NATS(), l.AMQP()} {
				if rmErr := os.RemoveAll(d); rmErr != nil {
					err = errors.Join(err, fmt.Errorf("remove the %s of a failed genesis: %w", filepath.Base(d), rmErr))
				}
			}
		}
		return GenesisResult{}, err
	}
	o.Logger.Info("genesis", "dir", dir, "bus", o.Bus, "users", len(res.Users), "fingerprint", res.Fingerprint)
	return res, nil
}

// writeServerFiles writes nats/ into a temporary directory inside the
// state directory, makes it durable and renames it into place.
func writeServerFiles(l statedir.Layout, f serverFiles, sync func(string) error) error {
	tmp, err := os.MkdirTemp(l.Dir, statedir.GenesisTemp)
	if err != nil {
		return fmt.Errorf("write genesis: %w", err)
	}
	defer os.RemoveAll(tmp)
	t := statedir.Layout{Dir: tmp}
	if err := os.Mkdir(t.NATS(), 0o755); err != nil {
		return fmt.Errorf("write genesis: %w", err)
	}
	for _, w := range []fileWrite{
		{path: t.ServerCert(), data: f.cert, perm: 0o644},
		{path: t.ServerKey(), data: f.key, perm: 0o600},
		{path: t.NATSConfig(), data: f.conf, perm: 0o644},
	} {
		if err := statedir.WriteSynced(w.path, w.data, w.perm); err != nil {
			return fmt.Errorf("write genesis: %w", err)
		}
	}
	if err := sync(t.NATS()); err != nil {
		return fmt.Errorf("write genesis: %w", err)
	}
	if f.amqp != nil {
		if err := os.Mkdir(t.AMQP(), 0o700); err != nil {
			return fmt.Errorf("write genesis: %w", err)
		}
		// Whoever starts the broker hands it these; the key and the
		// administrator's hash are for nobody else on this machine.
		for _, w := range []fileWrite{
			{path: t.AMQPCert(), data: f.amqp.cert, perm: 0o644},
			{path: t.AMQPKey(), data: f.amqp.key, perm: 0o600},
			{path: t.AMQPDefinitions(), data: f.amqp.definitions, perm: 0o600},
		} {
			if err := statedir.WriteSynced(w.path, w.data, w.perm); err != nil {
				return fmt.Errorf("write genesis: %w", err)
			}
		}
		if err := sync(t.AMQP()); err != nil {
			return fmt.Errorf("write genesis: %w", err)
		}
		// amqp/ first: a genesis stopped between the renames leaves it
		// without nats/, which the next genesis takes for leftovers.
		if err := os.Rename(t.AMQP(), l.AMQP()); err != nil {
			return fmt.Errorf("move genesis into place: %w", err)
		}
	}
	if err := os.Rename(t.NATS(), l.NATS()); err != nil {
		return fmt.Errorf("move genesis into place: %w", err)
	}
	if err := sync(l.Dir); err != nil {
		return fmt.Errorf("move genesis into place: %w", err)
	}
	return nil
}

// genesisState mints everything genesis writes, in memory.
func genesisState(m *meshdesc.Mesh, o Options) (store.State, serverFiles, GenesisResult, error) {
	fail := func(err error) (store.State, serverFiles, GenesisResult, error) {
		return store.State{}, serverFiles{}, GenesisResult{}, err
	}
	now := o.Now()
	ca, err := pki.NewCA(m.Name+" mesh authority", now)
	if err != nil {
		return fail(err)
	}
	certPEM, keyPEM, err := ca.IssueServer(m.Bus.Names, now)
	if err != nil {
		return fail(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		return fail(err)
	}
	declKey, err := newDeclarationKey()
	if err != nil {
		return fail(err)
	}
	principals := compose.Principals(m)
	state := store.State{Secrets: store.Secrets{}, Authority: ca, DeclarationKey: declKey, Credentials: map[string][]byte{}}
	res := GenesisResult{Fingerprint: fp, Bus: o.Bus}
	for _, p := range principals {
		sec, err := MintSecret(o.BcryptCost)
		if err != nil {
			return fail(err)
		}
		state.Secrets[p.User] = sec
		res.Users = append(res.Users, p.User)
	}
	conf, err := composeConfig(m, state.Secrets, o)
	if err != nil {
		return fail(err)
	}
	files := serverFiles{cert: certPEM, key: keyPEM, conf: conf}
	t := target{bus: NATS, addr: link.HostPort(m.Bus.Names[0], m.Bus.Port), fingerprint: fp}
	if o.Bus == AMQP {
		if m.AMQP == nil {
			return fail(fmt.Errorf("%w: genesis on AMQP: the description names no broker (amqp:)", ErrUnfit))
		}
		b := &brokerFiles{}
		if b.cert, b.key, err = ca.IssueServer(m.AMQP.Names, now); err != nil {
			return fail(err)
		}
		if state.Secrets[wire.AMQPAdminUser], err = MintSecret(o.BcryptCost); err != nil {
			return fail(err)
		}
		if b.definitions, err = bootDefinitions(m, state.Secrets); err != nil {
			return fail(err)
		}
		files.amqp = b
		if t.fingerprint, err = pki.Fingerprint(b.cert); err != nil {
			return fail(err)
		}
		t.bus, t.addr, t.controlUsers = AMQP, net.JoinHostPort(m.AMQP.Names[0], strconv.Itoa(m.AMQP.Port)), amqpdefs.ControlUsers(m)
		res.Fingerprint = t.fingerprint
	}
	for _, p := range principals {
		doc, err := t.credentialDoc(p, state.Secrets[p.User], declKey)
		if err != nil {
			return fail(err)
		}
		state.Credentials[p.User] = doc
	}
	return state, files, res, nil
}

// fileWrite is one new file a genesis or an AMQP mint writes before it
// moves the directory that holds it into place.
type fileWrite struct {
	path string
	data []byte
	perm fs.FileMode
}
