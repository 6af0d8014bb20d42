package amqpplane_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/linktest"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestContract runs the control plane's contract on RabbitMQ, in its
// container, with the definitions the controller mints: one broker for
// the suite, given back as declared and empty before each body
// (amqptest.Reset).
func TestContract(t *testing.T) {
	m := sample(t)
	br := amqptest.Start(t, m)
	linktest.Run(t, func(t *testing.T) linktest.Bus {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		br.Reset(ctx, t)
		c, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{})
		if err != nil {
			t.Fatalf("dial the controller: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Assert(ctx, m); err != nil {
			t.Fatalf("assert the topology: %v", err)
		}
		return &amqpBus{t: t, br: br, ctl: c}
	})
}

// amqpBus is the sample mesh's broker, its topology asserted, the
// controller connected.
type amqpBus struct {
	t   *testing.T
	br  *amqptest.Broker
	ctl *amqpplane.Controller
}

var (
	_ linktest.Enrolling = (*amqpBus)(nil)
	_ linktest.Outage    = (*amqpBus)(nil)
)

func (b *amqpBus) Nodes() (string, string)      { return "node-a", "node-b" }
func (b *amqpBus) Controller() plane.Controller { return b.ctl }

func (b *amqpBus) Host(node string) plane.Host {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := amqpplane.DialHost(ctx, b.br.Creds[wire.HostUser(node)], amqpplane.HostOptions{})
	if err != nil {
		b.t.Fatalf("dial %s's host: %v", node, err)
	}
	b.t.Cleanup(func() { _ = h.Close() })
	return h
}

func (b *amqpBus) Enroller() (plane.Enroller, string) {
	tok := b.br.Creds[wire.EnrolUser("tok-node-c")]
	return amqpplane.NewEnroller(tok, amqpplane.HostOptions{}), tok.Name
}

// Away stops the broker's application inside its container: every
// connection is closed and the listener goes, while the container and its
// mapped port stay (a container restarted would be given another port).
func (b *amqpBus) Away() { b.rabbitmqctl(b.t, "stop_app") }

// Back starts the application again; it returns once the broker takes
// connections (rabbitmqctl await_startup).
func (b *amqpBus) Back() {
	b.rabbitmqctl(b.t, "start_app")
	b.rabbitmqctl(b.t, "await_startup")
}

func (b *amqpBus) rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out, err := b.br.Container.Exec(ctx, append([]string{"rabbitmqctl"}, args...))
	if err != nil || code != 0 {
		t.Fatalf("rabbitmqctl %v: exit %d: %v", args, code, err)
	}
	_ = out
}

// Builder is a builder as it would be on AMQP: the builder's user
// consuming builds with a prefetch of one, a delivery its channel's until
// it is acked or the channel closes.
func (b *amqpBus) Builder() linktest.Builder {
	b.t.Helper()
	conn := b.br.Dial(b.t, wire.BuilderUser)
	ch, err := conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := ch.Qos(1, 0, false); err != nil {
		b.t.Fatal(err)
	}
	deliveries, err := ch.Consume(wire.QueueBuilds, "", false, false, false, false, nil)
	if err != nil {
		b.t.Fatalf("consume %s: %v", wire.QueueBuilds, err)
	}
	ab := &amqpBuilder{conn: conn, deliveries: deliveries}
	b.t.Cleanup(ab.Die)
	return ab
}

type amqpBuilder struct {
	conn       *amqp.Connection
	deliveries <-chan amqp.Delivery
	once       sync.Once
}

func (ab *amqpBuilder) Take(ctx context.Context, wait time.Duration) (linktest.Taken, bool, error) {
	select {
	case d, ok := <-ab.deliveries:
		if !ok {
			return linktest.Taken{}, false, fmt.Errorf("the builder's channel closed")
		}
		return linktest.Taken{ID: d.MessageId, Body: d.Body, Ack: func(context.Context) error { return d.Ack(false) }}, true, nil
	case <-time.After(wait):
		return linktest.Taken{}, false, nil
	case <-ctx.Done():
		return linktest.Taken{}, false, ctx.Err()
	}
}

// Die closes the builder's connection: what it took and did not ack goes
// back to the queue.
func (ab *amqpBuilder) Die() { ab.once.Do(func() { _ = ab.conn.Close() }) }
