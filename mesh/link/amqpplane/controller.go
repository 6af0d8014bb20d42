package amqpplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// LedgerWindow is how long the controller's ledger keeps an entry on
// AMQP, where the broker keeps no positions and recognises no duplicate:
// a message comes again (a redelivery, a publisher's retry after a
// confirm it did not get) within it. It is far above the longest hold
// (30 s) and a publisher's retries while it waits for its confirm.
const LedgerWindow = time.Hour

// ControllerOptions tune DialController.
type ControllerOptions struct {
	// ControlPerSubject is the bound of each control subject's queue the
	// assertion declares; amqpdefs.DefaultControlPerSubject when 0.
	ControlPerSubject int
	// MaxDeliver is the deliveries an event gets before it is
	// dead-lettered (the events queues' limit); amqpdefs's default when 0.
	MaxDeliver int
	// ResendEvery is how often every node's declaration is put again in
	// its queue (Keep); ResendEvery when 0.
	ResendEvery time.Duration
	// Timeout bounds a call whose context has no deadline.
	Timeout time.Duration
	// Address is host:port to dial instead of the credentials'.
	Address string
	Logger  *slog.Logger
}

// Controller is the controller on AMQP: a connection in the control
// plane's virtual host and one in the mesh's.
type Controller struct {
	o ControllerOptions
	// Control and Mesh are the two connections.
	Control, Mesh *amqpconn.Conn
	publishers    *amqpconn.Pool[*amqpconn.Publisher]
	log           *slog.Logger

	mu sync.Mutex
	m  *meshdesc.Mesh // the description last asserted: which queues there are
}

var _ plane.Controller = (*Controller)(nil)

// DialController connects as the controller's two users (control in
// wire.AMQPControlVhost, mesh in wire.AMQPVhost), each connection made
// again by itself when lost.
func DialController(ctx context.Context, control, mesh wire.Credential, o ControllerOptions) (*Controller, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = link.DefaultTimeout
	}
	if o.ResendEvery <= 0 {
		o.ResendEvery = ResendEvery
	}
	c := &Controller{o: o, log: o.Logger}
	var err error
	if c.Control, err = amqpconn.Dial(ctx, control, amqpconn.Options{Timeout: o.Timeout, Vhost: wire.AMQPControlVhost, Address: o.Address, Logger: o.Logger.With("user", control.User())}); err != nil {
		return nil, fmt.Errorf("connect as %s: %w", control.User(), loginErr(err))
	}
	if c.Mesh, err = amqpconn.Dial(ctx, mesh, amqpconn.Options{Timeout: o.Timeout, Vhost: wire.AMQPVhost, Address: o.Address, Logger: o.Logger.With("user", mesh.User())}); err != nil {
		_ = c.Control.Close(time.Now(), nil)
		return nil, fmt.Errorf("connect as %s: %w", mesh.User(), loginErr(err))
	}
	c.publishers = amqpconn.NewPool(c.Control.OpenPublisher)
	return c, nil
}

// loginErr adds plane.ErrLoginRefused to a login the broker refused.
func loginErr(err error) error {
	if errors.Is(err, amqpconn.ErrLoginRefused) {
		return fmt.Errorf("%w: %w", plane.ErrLoginRefused, err)
	}
	return err
}

// Close closes both connections.
func (c *Controller) Close() error {
	deadline := time.Now().Add(c.o.Timeout)
	return errors.Join(
		c.Control.Close(deadline, c.publishers.Close),
		c.Mesh.Close(deadline, nil),
	)
}

// Connected says whether the control plane's connection is up.
func (c *Controller) Connected() bool { return c.Control.Connected() }

// mesh is the description last asserted.
func (c *Controller) mesh() (*meshdesc.Mesh, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		return nil, errors.New("amqpplane: the controller has not asserted the bus yet (Assert first)")
	}
	return c.m, nil
}

// publish sends msg into the control plane through exchange with key and
// waits for the broker's confirm. mandatory: a message no queue takes is
// an error naming what is missing (the controller's own assertion made
// every queue, so this is drift or an operator's deletion).
func (c *Controller) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
	}
	err := amqpconn.Publish(ctx, c.publishers, key, exchange, key, true, msg)
	if errors.Is(err, amqpconn.ErrUnroutable) {
		return fmt.Errorf("%w: no queue of vhost %s takes %q on %q: %w", plane.ErrMissing, wire.AMQPControlVhost, key, exchangeName(exchange), err)
	}
	return noExchange(exchange, err)
}

func exchangeName(e string) string {
	if e == "" {
		return wire.ExchangeDefault
	}
	return e
}

// CheckEnrolReply accepts only the token's own answer queue
// (wire.CheckEnrolQueue): the controller writes the default exchange,
// which reaches every queue of the control plane by name.
func (c *Controller) CheckEnrolReply(token, reply string) error {
	return wire.CheckEnrolQueue(token, reply)
}

// Answer puts an enrolment's answer in the token's answer queue, through
// the default exchange, persistent, confirmed.
func (c *Controller) Answer(ctx context.Context, reply string, body []byte) error {
	return c.publish(ctx, wire.ExchangeByQueueName, reply, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: wire.NewID(), Body: body,
	})
}

// Flush has nothing to wait for: answers are confirmed as they are
// published, and AMQP confirms no acknowledgement.
func (c *Controller) Flush(context.Context) error { return nil }

// RequestBuild puts a build request in builds, its id as message-id.
func (c *Controller) RequestBuild(ctx context.Context, id string, body []byte) error {
	return c.publish(ctx, wire.ExchangeControl, wire.SubjectBuildRequest, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, Body: body,
	})
}

// Prunable: AMQP keeps no positions (every entry's is 0, below any) and
// recognises no duplicate: an entry goes once LedgerWindow has passed.
func (c *Controller) Prunable(context.Context) (uint64, time.Duration, error) {
	return math.MaxUint64, LedgerWindow, nil
}

// Assert declares what the mesh needs on the broker, idempotently: the
// objects of both virtual hosts as amqpdefs derives them from m (the
// definitions the broker may also have loaded at boot). An object that
// exists with other arguments is drift the broker cannot correct
// (406 PRECONDITION_FAILED): plane.ErrDrift, naming it; nothing after it
// is declared.
func (c *Controller) Assert(ctx context.Context, m *meshdesc.Mesh) (plane.Asserted, error) {
	d, err := amqpdefs.Objects(m, amqpdefs.Inputs{ControlPerSubject: c.o.ControlPerSubject, MaxDeliver: c.o.MaxDeliver})
	if err != nil {
		return plane.Asserted{}, err
	}
	var a plane.Asserted
	for _, x := range []struct {
		vhost string
		conn  *amqpconn.Conn
	}{{wire.AMQPControlVhost, c.Control}, {wire.AMQPVhost, c.Mesh}} {
		got, err := declare(ctx, x.conn, x.vhost, d)
		a.Created = append(a.Created, got...)
		if err != nil {
			return a, err
		}
	}
	c.mu.Lock()
	c.m = m
	c.mu.Unlock()
	return a, nil
}

// purge empties queue; a queue that is not there has nothing to purge.
func (c *Controller) purge(ctx context.Context, queue string) error {
	ch, err := c.Control.Channel(ctx)
	if err != nil {
		return fmt.Errorf("purge %s: %w", queue, err)
	}
	defer func() { _ = ch.Close() }()
	err = amqpconn.Bounded(ctx, ch, func() error {
		_, err := ch.QueuePurge(queue, false)
		return err
	})
	if err != nil && amqpconn.BrokerCode(err) != wire.AMQPNotFound {
		return fmt.Errorf("purge %s: %w", queue, amqpconn.Refused(err))
	}
	return nil
}
