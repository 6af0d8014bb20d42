// Package client is a person's client of the mesh (design 25 §7): it
// connects with a person's credential through the SDK's contract (package
// sdk, the same code path a module's tool calls take, not a second
// protocol), lists the tools the person may call by asking the catalogue
// (wire.CatalogSeat), and calls them. cmd/mesh is built on it, as a
// command line and as an MCP server (package mcpserve).
//
// A call goes straight to its tool: one round trip, and no dependence on
// the catalogue, so a tool is callable while the catalogue is down. Only
// when the bus answers that nobody serves the tool, or refuses the call,
// is the catalogue asked whether the mesh has such a tool at all, so that
// a mistyped name says "no such tool" rather than "no grant". (A person's
// grant is resolved to the tools the manifests declare, so a tool that
// does not exist is refused by the bus before it could lack a responder.)
//
// A person revoked while a client is open is told so: the server closes
// the connection and refuses the credential on reconnecting, nats.go then
// gives up (after two refusals, some seconds), and the client, seeing its
// connection closed without having closed it, dials once more to learn
// why — KindRefused, as a fresh Open says at once.
//
// Every failure of a call is an *Error of a Kind, whose message names
// what happened and whose Exit is cmd/mesh's exit status.
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// bus is what the client needs of its connection: a call, and closing it.
// *sdk.Module is one; a test gives a fake.
type bus interface {
	Request(ctx context.Context, module, tool string, args []byte) ([]byte, error)
	Close() error
}

// Client is one person's connection to the mesh. Its methods are safe for
// concurrent use.
type Client struct {
	cred    wire.Credential
	timeout time.Duration
	// dial connects again, when the bus closed the connection: it tells a
	// revoked credential apart from a lost connection.
	dial func(ctx context.Context) (bus, error)

	mu     sync.Mutex
	bus    bus
	closed bool
}

type options struct {
	log     *slog.Logger
	timeout time.Duration
}

// Option changes how Open connects.
type Option func(*options)

// WithLogger sends the SDK's lines to l instead of slog.Default(): a
// program whose stdout is a protocol (mesh mcp) logs to stderr only.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithTimeout bounds every call whose context has no deadline, and the
// connection's other waits, instead of sdk.DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Open reads the credential at credentialPath (the file wire.EnvCredential
// names when it is empty), refuses one that is not a person's — a module's
// or a host's credential would connect, as somebody else — and connects
// through the SDK. A credential the bus does not know (revoked, or never
// issued) is KindRefused; a credential that is not a person's, or cannot
// be read, KindUsage; anything else KindFailed.
func Open(ctx context.Context, credentialPath string, opts ...Option) (*Client, error) {
	o := options{log: slog.Default(), timeout: sdk.DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout <= 0 {
		return nil, failure(KindUsage, "", nil, "timeout %s: want a positive duration", o.timeout)
	}
	path := credentialPath
	if path == "" {
		path = os.Getenv(wire.EnvCredential)
	}
	if path == "" {
		return nil, failure(KindUsage, "", nil, "no credential: no path given, and $%s is empty", wire.EnvCredential)
	}
	cred, err := readPerson(path)
	if err != nil {
		return nil, err
	}
	c := &Client{cred: cred, timeout: o.timeout}
	c.dial = func(ctx context.Context) (bus, error) {
		m, err := sdk.Connect(ctx, path, sdk.WithLogger(o.log), sdk.WithTimeout(o.timeout))
		if err != nil {
			return nil, c.connectError(err)
		}
		return m, nil
	}
	if c.bus, err = c.dial(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// readPerson reads a person's credential, and refuses anyone else's.
func readPerson(path string) (wire.Credential, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return wire.Credential{}, failure(KindUsage, "", err, "read credential: %v", err)
	}
	cred, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, failure(KindUsage, "", err, "credential %s: %v", path, err)
	}
	if cred.Bootstrap {
		return wire.Credential{}, failure(KindUsage, "", nil, "credential %s is a bootstrap URL, not a person's credential (mesh-controller person issue makes one)", path)
	}
	if cred.Principal != wire.PrincipalPerson {
		return wire.Credential{}, failure(KindUsage, "", nil, "credential %s is %s, not a person's: mesh speaks for a person (mesh-controller person issue makes one)", path, whose(cred))
	}
	return cred, nil
}

// whose names the principal a credential that is not a person's was
// issued to.
func whose(cred wire.Credential) string {
	switch cred.Principal {
	case wire.PrincipalModule:
		return fmt.Sprintf("module %s's on node %s", cred.Module, cred.Node)
	case wire.PrincipalHost:
		return fmt.Sprintf("the host's of node %s", cred.Node)
	case wire.PrincipalController:
		return "the controller's"
	case wire.PrincipalEnrol:
		return fmt.Sprintf("enrolment token %s's", cred.Name)
	}
	return fmt.Sprintf("a %q principal's", cred.Principal)
}

// connectError says why the SDK could not connect. The server refuses a
// user it does not know with an authorization violation, which nats.go
// reports as nats.ErrAuthorization and the SDK wraps: the SDK has no
// sentinel of its own for it.
func (c *Client) connectError(err error) error {
	// A credential for AMQP may be one a cutover left behind: the mesh
	// moved to NATS, the broker's mesh side was removed, and the person
	// keeps what was sealed to it before (rollout.PersonsToIssueAgain).
	left := ""
	if wire.BusOfScheme(c.cred.Scheme()) == wire.BusAMQP {
		left = "; if the mesh moved to NATS since it was issued, it names the broker the mesh left: ask the operator to issue it again (mesh-controller status names whom)"
	}
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, amqpconn.ErrLoginRefused):
		return failure(KindRefused, "", err, "the bus refused person %s's credential: it was revoked, or never issued%s", c.cred.Name, left)
	case errors.Is(err, sdk.ErrFingerprint):
		return failure(KindFailed, "", err, "the bus at %s is not the one the credential pins: %v", c.cred.HostPort(), err)
	}
	return failure(KindFailed, "", err, "connect to the bus at %s as person %s: %v%s", c.cred.HostPort(), c.cred.Name, err, left)
}

// Person is the name of the person the credential was issued to.
func (c *Client) Person() string { return c.cred.Name }

// Close closes the connection. Calls after Close fail (KindFailed).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if err := c.bus.Close(); err != nil {
		return fmt.Errorf("close person %s's connection: %w", c.cred.Name, err)
	}
	return nil
}

// current is the connection calls go through.
func (c *Client) current() (bus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, failure(KindFailed, "", sdk.ErrClosed, "the client is closed")
	}
	return c.bus, nil
}

// lost is told that the bus closed the connection failed, which the
// client did not: nats.go closes a connection by itself only when the
// server refuses its credential on reconnecting, so the client connects
// again to learn whether it was revoked (KindRefused) or not. If the new
// connection is open, later calls go through it; the call that saw the
// old one closed may or may not have run.
func (c *Client) lost(ctx context.Context, failed bus, tool string, cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return failure(KindFailed, tool, cause, "the client is closed")
	}
	if c.bus != failed {
		// Another call connected again already.
		return failure(KindFailed, tool, cause, "the bus closed the connection during the call to %s; the client is connected again, and the call may or may not have run", tool)
	}
	fresh, err := c.dial(ctx)
	if err != nil {
		if KindOf(err) == KindRefused {
			return err
		}
		return failure(KindFailed, tool, errors.Join(cause, err), "the bus closed the connection, and connecting again failed: %v", err)
	}
	_ = c.bus.Close()
	c.bus = fresh
	return failure(KindFailed, tool, cause, "the bus closed the connection during the call to %s; the client is connected again, and the call may or may not have run", tool)
}
