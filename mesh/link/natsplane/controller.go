package natsplane

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// ControllerOptions tune DialController.
type ControllerOptions struct {
	// Policy is what the streams are asserted with; zero means
	// DefaultPolicy.
	Policy Policy
	// Dial are extra bus options (a test dials another address).
	Dial []link.Option
	// Logger; default discards.
	Logger *slog.Logger
}

// Controller is the controller on NATS: a user in each account it owns
// streams in (docs/decisions/0001), the control account's connection
// carrying CONTROL, NODES, BUILDS and the answers, the mesh account's
// EVENTS and DEAD.
type Controller struct {
	// Control and Mesh are the two connections, for a test that looks at
	// the bus beside the controller.
	Control, Mesh     *nats.Conn
	jsControl, jsMesh jetstream.JetStream
	policy            Policy
	log               *slog.Logger
}

var _ plane.Controller = (*Controller)(nil)

// DialController connects as the controller's two users (control:
// wire.ControllerUser, mesh: wire.ControllerMeshUser). Each connection
// reconnects forever, since the bus coming back is the only way forward,
// and says so in the log.
func DialController(ctx context.Context, control, mesh wire.Credential, o ControllerOptions) (*Controller, error) {
	if o.Policy.Bytes == nil {
		o.Policy = DefaultPolicy()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{policy: o.Policy, log: o.Logger}
	for _, x := range []struct {
		cred wire.Credential
		nc   **nats.Conn
	}{{control, &c.Control}, {mesh, &c.Mesh}} {
		nc, err := link.Dial(ctx, x.cred, append(connOptions(o.Logger, x.cred.User()), o.Dial...)...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("connect as %s: %w", x.cred.User(), err)
		}
		*x.nc = nc
	}
	var err error
	if c.jsControl, err = jetstream.New(c.Control); err != nil {
		c.Close()
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	if c.jsMesh, err = jetstream.New(c.Mesh); err != nil {
		c.Close()
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	return c, nil
}

// connOptions keep a controller's connection for its whole life.
func connOptions(log *slog.Logger, user string) []link.Option {
	return []link.Option{
		link.WithName("mesh-controller"),
		link.WithNATSOptions(
			nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected from the bus", "user", user, "err", err) }),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				log.Info("reconnected to the bus", "user", user, "server", nc.ConnectedUrlRedacted())
			}),
		),
	}
}

// Close closes both connections.
func (c *Controller) Close() error {
	for _, nc := range []*nats.Conn{c.Control, c.Mesh} {
		if nc != nil {
			nc.Close()
		}
	}
	return nil
}

// JetStreams are the two connections' JetStream contexts by account.
func (c *Controller) JetStreams() (JetStreams, error) {
	return JetStreams{wire.AccountControl: c.jsControl, wire.AccountMesh: c.jsMesh}, nil
}

// Assert makes the streams and consumers what m needs (DesiredState with
// the controller's Policy): see the package function Assert.
func (c *Controller) Assert(ctx context.Context, m *meshdesc.Mesh) (plane.Asserted, error) {
	jss, _ := c.JetStreams()
	r, err := Assert(ctx, jss, DesiredState(m, c.policy), c.log)
	return plane.Asserted{Created: r.Created, Corrected: r.Corrected, Deleted: r.Deleted}, err
}

// Connected says whether the control account's connection is up.
func (c *Controller) Connected() bool { return c.Control.IsConnected() }

// CheckEnrolReply accepts only an inbox under the token's own prefix
// (wire.CheckEnrolReply).
func (c *Controller) CheckEnrolReply(token, reply string) error {
	return wire.CheckEnrolReply(token, reply)
}

// Answer publishes an enrolment's answer on the reply its payload named.
func (c *Controller) Answer(_ context.Context, reply string, body []byte) error {
	return c.Control.Publish(reply, body)
}

// Flush waits until what the control account's connection sent so far
// (answers, acknowledgements) is taken by the server.
func (c *Controller) Flush(ctx context.Context) error { return c.Control.FlushWithContext(ctx) }

// RequestBuild asks BUILDS for a build, with the build's id as message id:
// a redelivered announcement asks again, and the server keeps one.
func (c *Controller) RequestBuild(ctx context.Context, id string, body []byte) error {
	_, err := c.jsControl.Publish(ctx, wire.SubjectBuildRequest, body, jetstream.WithMsgID(id))
	return err
}
