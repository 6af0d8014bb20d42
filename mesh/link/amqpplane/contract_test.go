package amqpplane_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/linktest"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestContract runs the control plane's contract on RabbitMQ, in its
// container, with the definitions the controller mints, and then what
// AMQP alone has to close: one broker for the suite, given back as
// declared and empty before each body (amqptest.Reset).
func TestContract(t *testing.T) {
	m := withProvider(t, sample(t))
	br := amqptest.Start(t, m, amqptest.WithMaxDeliver(eventsMaxDeliver))
	raise := func(t *testing.T) linktest.Bus {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		br.Reset(ctx, t)
		c, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{MaxDeliver: eventsMaxDeliver})
		if err != nil {
			t.Fatalf("dial the controller: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Assert(ctx, m); err != nil {
			t.Fatalf("assert the topology: %v", err)
		}
		return &amqpBus{t: t, br: br, ctl: c}
	}
	linktest.Run(t, raise)
	// What AMQP alone has to close, on the same broker.
	t.Run("WhatTheBrokerDidNotRouteIsNeitherStatusNorDeadLetter", func(t *testing.T) { notRouted(t, raise(t).(*amqpBus)) })
	t.Run("ARevisionIsFetchedFromTheRepositoryByItsQueues", func(t *testing.T) { fetchedFromTheRepository(t, raise(t).(*amqpBus)) })
	t.Run("AnArtifactIsCopiedToTheHostItIsDeclaredToAlone", func(t *testing.T) { artifactCopiedToItsHost(t, raise(t).(*amqpBus)) })
}

// amqpBus is the sample mesh's broker, its topology asserted, the
// controller connected.
type amqpBus struct {
	t   *testing.T
	br  *amqptest.Broker
	ctl *amqpplane.Controller
}

var (
	_ linktest.Enrolling     = (*amqpBus)(nil)
	_ linktest.Outage        = (*amqpBus)(nil)
	_ linktest.DeadLettering = (*amqpBus)(nil)
	_ linktest.Provisioning  = (*amqpBus)(nil)
)

// eventsMaxDeliver is how often a module's events queue delivers an event
// on the contract's broker before it dead-letters it.
const eventsMaxDeliver = 2

// provider is the module that provides on the contract's broker: the
// sample mesh has none, so its sensor is made one, and may emit the
// provisioner events (meshdesc.Module.AllEmits, amqpdefs's grants).
const provider = "sensor"

// withProvider makes provider a provider of m.
func withProvider(t *testing.T, m *meshdesc.Mesh) *meshdesc.Mesh {
	t.Helper()
	for i := range m.Modules {
		if m.Modules[i].Name == provider {
			m.Modules[i].Provides = []string{"store"}
			return m
		}
	}
	t.Fatalf("the sample mesh has no module %s", provider)
	return nil
}

// emit publishes an event as module on node, through the events exchange
// with its routing key, persistent, and waits for the broker's confirm.
func (b *amqpBus) emit(node, module, key, eventID string, body []byte) string {
	b.t.Helper()
	ch, err := b.br.Dial(b.t, wire.AMQPUser(node, module)).Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirm(wire.ExchangeEvents, wire.EventRoutingKey(module, key), false, false, amqp.Publishing{
		Headers:      amqp.Table{wire.HeaderEventID: eventID},
		ContentType:  wire.ContentTypeJSON,
		DeliveryMode: amqp.Persistent,
		Body:         body,
	})
	if err != nil {
		b.t.Fatalf("emit %s.%s as %s on %s: %v", module, key, module, node, err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		b.t.Fatalf("emit %s.%s as %s on %s: not confirmed (%v)", module, key, module, node, err)
	}
	return wire.EventSubject(module, key)
}

// Provide has node-a's provider emit a provisioner event with its own
// credential.
func (b *amqpBus) Provide(key, eventID string, body []byte) string {
	return b.emit("node-a", provider, key, eventID, body)
}

// Poison has node-a's sensor emit a reading and node-b's logger, which
// consumes readings, give each delivery of it back until its queue's
// delivery limit dead-letters it to mesh.dead.
func (b *amqpBus) Poison(eventID string) (consumer, subject string, deliveries int) {
	b.t.Helper()
	subject = b.emit("node-a", "sensor", "reading", eventID, []byte(`{}`))
	ch, err := b.br.Dial(b.t, wire.AMQPUser("node-b", "logger")).Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(1, 0, false); err != nil {
		b.t.Fatal(err)
	}
	queue := wire.EventsQueue("node-b", "logger")
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		b.t.Fatalf("consume %s: %v", queue, err)
	}
	for range eventsMaxDeliver {
		select {
		case d := <-ds:
			if got := d.Headers[wire.HeaderEventID]; got != eventID {
				b.t.Fatalf("expected event %s delivered to %s, got %v", eventID, queue, got)
			}
			if err := d.Nack(false, true); err != nil {
				b.t.Fatalf("give back %s: %v", eventID, err)
			}
		case <-time.After(10 * time.Second):
			b.t.Fatalf("expected event %s delivered to %s", eventID, queue)
		}
	}
	return wire.ModuleConsumer("node-b", "logger"), subject, eventsMaxDeliver
}

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

// Builder is the builder connected as itself through the seam
// (amqpplane.DialBuilder), as mesh-build connects.
func (b *amqpBus) Builder() plane.Builder {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bl, err := amqpplane.DialBuilder(ctx, b.br.Creds[wire.BuilderUser], amqpplane.HostOptions{})
	if err != nil {
		b.t.Fatalf("dial the builder: %v", err)
	}
	b.t.Cleanup(func() { _ = bl.Close() })
	return bl
}

// Source is the sample mesh's repository connected as itself.
func (b *amqpBus) Source() (plane.Source, string) {
	b.t.Helper()
	const repo = "modules"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := amqpplane.DialSource(ctx, b.br.Creds[wire.SourceUser(repo)], amqpplane.HostOptions{})
	if err != nil {
		b.t.Fatalf("dial repository %s: %v", repo, err)
	}
	b.t.Cleanup(func() { _ = s.Close() })
	return s, repo
}
