package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/hostctr"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// Enrolment is how a host member of the cluster joined: the token the
// harness issued it (kept, so a bed can present it again) and when, and
// when the host said it was connected as itself.
type Enrolment struct {
	Node  string
	Token wire.Credential
	// TokenDoc is the token as the controller printed it, byte for byte.
	TokenDoc []byte
	Issued   time.Time
	Ready    time.Time
}

// Took is the enrolment's time: token issued to host connected as itself.
func (e Enrolment) Took() time.Duration { return e.Ready.Sub(e.Issued) }

// IssueToken has the controller issue an enrolment token for node
// (`mesh-controller token issue`, a one-shot beside the state; its user is
// composed into nats.conf at once) and returns it.
func (c *Cluster) IssueToken(ctx context.Context, node string) (wire.Credential, []byte, error) {
	return c.IssueTokenFor(ctx, node, 0)
}

// IssueTokenFor is IssueToken for a token that may be claimed for ttl
// (the controller's default when zero). Every token keeps its user for
// the topology's grace once spent or expired (TokenGrace).
func (c *Cluster) IssueTokenFor(ctx context.Context, node string, ttl time.Duration) (wire.Credential, []byte, error) {
	doc, err := c.controllerStdout(ctx, "token", controllerctr.TokenArgs(filepath.Base(controllerctr.MeshFile), node, ttl, c.topology.TokenGrace))
	if err != nil {
		return wire.Credential{}, nil, fmt.Errorf("issue a token for %s: %w", node, err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return wire.Credential{}, nil, fmt.Errorf("issue a token for %s: what the controller printed: %w", node, err)
	}
	return cred, doc, nil
}

// TokenGrace is how long each token the harness issues keeps its user on
// the bus once spent or expired: the topology's grace, or the
// controller's default.
func (c *Cluster) TokenGrace() time.Duration {
	if c.topology.TokenGrace > 0 {
		return c.topology.TokenGrace
	}
	return store.SpentTokenGrace
}

// IssuePerson has the controller issue the person name a user that may
// call tools (every declared tool when admin), and returns its credential
// sealed to key (seal.EncodePublic), as mesh-controller person issue
// printed it (wire.SealedCredential).
func (c *Cluster) IssuePerson(ctx context.Context, name string, tools []string, admin bool, key string) ([]byte, error) {
	doc, err := c.controllerStdout(ctx, "person", controllerctr.PersonIssueArgs(filepath.Base(controllerctr.MeshFile), name, tools, admin, key))
	if err != nil {
		return nil, fmt.Errorf("issue the person %s: %w", name, err)
	}
	return doc, nil
}

// RevokePerson has the controller revoke the person name.
func (c *Cluster) RevokePerson(ctx context.Context, name string) error {
	if _, err := c.controllerStdout(ctx, "person", controllerctr.PersonRevokeArgs(filepath.Base(controllerctr.MeshFile), name)); err != nil {
		return fmt.Errorf("revoke the person %s: %w", name, err)
	}
	return nil
}

// Enrolment is how the host member on node joined the cluster.
func (c *Cluster) Enrolment(node string) (Enrolment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.enrolments[node]
	if !ok {
		var hosts []string
		for _, m := range c.topology.OfKind(topology.KindHost) {
			hosts = append(hosts, m.Name)
		}
		return Enrolment{}, fmt.Errorf("enrolment of %q: %w (this cluster's hosts: %s)", node, ErrUnknownMember, strings.Join(hosts, ", "))
	}
	return e, nil
}

// startHost raises the host of node m.Name: a token issued by the
// controller, then mesh-host run with it on the private network, waited
// for until it is connected as the node's own host user, as root (its
// modules run as users of their own).
func (c *Cluster) startHost(ctx context.Context, m topology.Member) error {
	token, doc, err := c.IssueToken(ctx, m.Name)
	if err != nil {
		return err
	}
	issued := time.Now()
	state := filepath.Join(c.s.work, "hosts", m.Name)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("start host %s: %w", m.Name, err)
	}
	role := m.Name
	opts := append(c.s.common(role),
		hostctr.AsRoot(),
		hostctr.WithToken(doc),
		network.WithNetworkName([]string{m.Name}, c.networks[Private]),
		hostctr.WithStartupTimeout(c.readyTimeout),
	)
	// The host writes its state as root, and its modules' homes as users
	// of their own: bound from the work directory only when this process
	// can remove what they write; otherwise it lives in the container's
	// layer, which a stop and a start keep too.
	if os.Geteuid() == 0 {
		opts = append(opts, hostctr.WithStateDir(state))
	}
	ctr, runErr := hostctr.Run(ctx, c.images.host, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, role, hostctr.ReadyLog, c.readyTimeout, got, runErr)
	if h != nil {
		c.setRole(role, h)
	}
	if err != nil {
		return err
	}
	e := Enrolment{Node: m.Name, Token: token, TokenDoc: doc, Issued: issued, Ready: time.Now()}
	c.mu.Lock()
	c.enrolments[m.Name] = e
	c.mu.Unlock()
	c.s.narrate("host %s enrolled with token %s and connected as itself in %s", m.Name, token.Name, e.Took().Round(time.Millisecond))
	return nil
}
