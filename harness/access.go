package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/mesh/wire"
)

// Handle returns the handle of the long-running container playing
// role: RoleNATS, RoleController, RoleStore, a host's node …
func (c *Cluster) Handle(role string) (*Handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.roles[role]
	if !ok {
		return nil, fmt.Errorf("container %q: %w (want %s or %s)", role, ErrUnknownRole, RoleNATS, RoleController)
	}
	return h, nil
}

// Credential is the credential document the controller holds for user (a
// wire user name: wire.ControllerUser, wire.ModuleUser(…) …), as an
// operator has it: `mesh-controller credential USER`, a one-shot beside
// the state, reading whichever store the cluster's controller keeps (the
// state directory's files, or the store member's PostgreSQL). One path
// for both: the harness never reads the controller's files itself.
func (c *Cluster) Credential(ctx context.Context, user string) (wire.Credential, error) {
	if !isUserName(user) {
		return wire.Credential{}, fmt.Errorf("credential: %q is not a user name", user)
	}
	doc, err := c.controllerStdout(ctx, "credential", controllerctr.CredentialArgs(user))
	if err != nil {
		return wire.Credential{}, fmt.Errorf("credential of %s: %w", user, err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("credential of %s: %w", user, err)
	}
	return cred, nil
}

// isUserName reports whether user can name a principal: one word of a
// user name's characters, no path in it.
func isUserName(user string) bool {
	return user != "" && user == filepath.Base(user) && !strings.HasPrefix(user, ".") && !strings.ContainsAny(user, " \t\n")
}

// BusAddress is 127.0.0.1:<port> where the bus's client port is published
// on this host. Ask again after restarting the nats container: Docker may
// choose another port.
func (c *Cluster) BusAddress(ctx context.Context) (string, error) {
	if c.nats == nil {
		return "", errors.New("bus address: the nats container is not running")
	}
	addr, err := c.nats.ClientAddress(ctx)
	if err != nil {
		return "", infra("bus address", err)
	}
	c.mu.Lock()
	c.busAddr = addr
	c.mu.Unlock()
	return addr, nil
}

// StateDir is the host directory holding the controller's state (bound
// at /var/lib/mesh), laid out as mesh/controller.Layout says.
func (c *Cluster) StateDir() string { return c.state }

// MeshFile is the host path of the description the cluster was raised
// from (bound at /mesh/mesh.yaml).
func (c *Cluster) MeshFile() string {
	return filepath.Join(c.meshDir, filepath.Base(controllerctr.MeshFile))
}

// NetworkName is the Docker name of the network Private or Outside.
func (c *Cluster) NetworkName(which string) (string, error) {
	n, ok := c.networks[which]
	if !ok {
		return "", fmt.Errorf("network %q: %w (want %s or %s)", which, ErrUnknownRole, Private, Outside)
	}
	return n, nil
}

// Session is the run the cluster belongs to.
func (c *Cluster) Session() *Session { return c.s }

// SaveLogs writes every container's output to dir/<role>.log (see
// Session.SaveLogs).
func (c *Cluster) SaveLogs(ctx context.Context, dir string) error { return c.s.SaveLogs(ctx, dir) }
