package harness

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/nats"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
)

// A NATS server an operator raises beside the broker of a mesh on AMQP,
// before the mesh adopts it (design 25 §9 step 2): the nats image, the
// mesh's bus ports, the certificate the mesh minted for its names, and a
// configuration and JetStream data of its own. Its configuration
// directory is inside the controller's state directory, so that every
// controller container reaches its watched file at the same path.
const (
	// besideDir is that directory, under the state directory.
	besideDir = "mesh-broker"
	// BesideName is the server_name it is raised with, and BesideUser
	// and BesideAccount the operator's own user and account on it.
	BesideName    = "beside"
	BesideUser    = "ops"
	BesideAccount = "OPS"
)

// NATSBeside is the server raised beside the broker, as the steps reach
// it.
type NATSBeside struct {
	// Config is its watched configuration file, as a controller
	// container reaches it (mesh-controller adopt --config).
	Config string
	// Password is BesideUser's.
	Password string
	// Fingerprint is its certificate's, which a client pins.
	Fingerprint string
}

// RaiseNATSBeside raises the NATS server beside the broker of a mesh on
// AMQP with its own configuration: its name BesideName, TLS with the
// certificate the mesh minted for the bus's names, JetStream on its own
// store, and an account of its own with the operator's user. A server
// raised already is returned as it is.
func (c *Cluster) RaiseNATSBeside(ctx context.Context) (NATSBeside, error) {
	i := slices.IndexFunc(c.topology.Members, func(m topology.Member) bool { return m.Kind == topology.KindNATS && m.OnDemand })
	if i < 0 || c.topology.MeshBus() != topology.BusAMQP {
		return NATSBeside{}, fmt.Errorf("raise a NATS server beside the broker: %w: this cluster's topology has no %s member raised on demand beside a mesh on %s (it has: %v)",
			ErrUnknownMember, topology.KindNATS, topology.BusAMQP, c.topology.Names())
	}
	c.mu.Lock()
	raised := c.beside
	c.mu.Unlock()
	if raised != nil {
		return *raised, nil
	}
	m, err := meshdesc.Load(c.MeshFile())
	if err != nil {
		return NATSBeside{}, err
	}
	l := statedir.Layout{Dir: c.state}
	dir := filepath.Join(c.state, besideDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return NATSBeside{}, fmt.Errorf("raise the NATS server beside the broker: %w", err)
	}
	// The certificate the mesh minted for the bus's names (genesis does
	// on either bus): the operator raises the server for the mesh.
	cert, err := os.ReadFile(l.ServerCert())
	if err != nil {
		return NATSBeside{}, fmt.Errorf("the certificate the mesh minted for its bus: %w", err)
	}
	key, err := os.ReadFile(l.ServerKey())
	if err != nil {
		return NATSBeside{}, fmt.Errorf("the key the mesh minted for its bus: %w", err)
	}
	fp, err := pki.Fingerprint(cert)
	if err != nil {
		return NATSBeside{}, err
	}
	password := rand.Text()
	// One JSON document, as the nats image's entrypoint takes nothing
	// else (docs/nats-entrypoint.md); the settings are the operator's.
	conf, err := json.MarshalIndent(map[string]any{
		"server_name": BesideName,
		"listen":      "0.0.0.0:" + strconv.Itoa(m.Bus.Port),
		"http":        m.Bus.Monitor + ":" + strconv.Itoa(m.Bus.MonitorPort),
		"tls": map[string]any{
			"cert_file": path.Join(nats.ConfigDir, compose.CertFile),
			"key_file":  path.Join(nats.ConfigDir, compose.KeyFile),
			"timeout":   2,
		},
		"jetstream": map[string]any{"store_dir": nats.StoreDir},
		"accounts": map[string]any{
			BesideAccount: map[string]any{
				"jetstream": "enabled",
				"users":     []any{map[string]any{"user": BesideUser, "password": password}},
			},
		},
	}, "", "  ")
	if err != nil {
		return NATSBeside{}, err
	}
	for _, f := range []struct {
		name string
		data []byte
		perm os.FileMode
	}{{compose.CertFile, cert, 0o644}, {compose.KeyFile, key, 0o600}, {compose.ConfigFile, append(conf, '\n'), 0o644}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.perm); err != nil {
			return NATSBeside{}, fmt.Errorf("raise the NATS server beside the broker: %w", err)
		}
	}
	if err := c.startNATSWith(ctx, c.topology.Members[i], dir); err != nil {
		return NATSBeside{}, err
	}
	b := NATSBeside{Config: path.Join(controllerctr.StateDir, besideDir, compose.ConfigFile), Password: password, Fingerprint: fp}
	c.mu.Lock()
	c.beside = &b
	c.mu.Unlock()
	c.s.narrate("NATS server raised beside the broker, its configuration its own")
	return b, nil
}

// ReadNATSBesideConfig is the configuration file the server raised beside
// the broker watches, as it is now.
func (c *Cluster) ReadNATSBesideConfig() ([]byte, error) {
	return os.ReadFile(filepath.Join(c.state, besideDir, compose.ConfigFile))
}

// AdoptBeside runs mesh-controller adopt on the server raised beside the
// broker (its watched file, whether it was raised yet or not), asking it
// at monitor ("" the description's bus.monitor): what it printed, and its
// exit status.
func (c *Cluster) AdoptBeside(ctx context.Context, monitor string) (string, int, error) {
	args := append(controllerctr.Args("adopt", filepath.Base(controllerctr.MeshFile)), "--config", path.Join(controllerctr.StateDir, besideDir, compose.ConfigFile))
	if monitor != "" {
		args = append(args, "--monitor", monitor)
	}
	return c.RunController(ctx, args...)
}

// cutoverTimeout bounds how long the harness waits for mesh-controller
// cutover to exit: it follows the cutover until it ends or its --wait is
// over, which a step keeps below this.
const cutoverTimeout = 5 * time.Minute

// Cutover runs mesh-controller cutover with args, beside the running
// controller that drives it (docs/decisions/0013-cutover.md): what it
// printed, and its exit status. Always in a container of its own, never
// in the controller's: a step may stop or kill the controller while the
// cutover is followed, and the command must outlive it, as an operator's
// would.
func (c *Cluster) Cutover(ctx context.Context, args ...string) (string, int, error) {
	got, err := c.runControllerOneShot(ctx, "controller-cutover", append(controllerctr.Args("cutover", filepath.Base(controllerctr.MeshFile)), args...), cutoverTimeout)
	if err != nil {
		return "", -1, err
	}
	return got.output, got.exit, nil
}
