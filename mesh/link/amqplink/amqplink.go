// Package amqplink is the modules' AMQP binding (design 19 on the bus the
// mesh has today, RabbitMQ: design 25 §1, spelled in mesh/wire/amqp.go).
// Events are published to the topic exchange mesh.events and consumed
// from the module's quorum queue <node>.<module>.events; tools are served
// from the shared queue serve.<module>.<tool> and called through mesh.rpc
// with RabbitMQ's direct reply-to. It implements link.Transport,
// declares nothing on the broker (the mesh's definitions did: package
// amqpdefs), and decides nothing about an envelope: package sdk does.
//
// A lost connection is dialled again with backoff until Close (see Bus).
//
// Every operation runs on a channel of its own kind, used by one
// operation at a time: RabbitMQ answers a refused operation (403
// ACCESS_REFUSED, 404 NOT_FOUND) by closing the channel it came on, so a
// channel per operation is what lets a refusal be reported to the call
// that caused it, and no other.
package amqplink

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bus is one module's AMQP connection. When the broker or the network
// drops it, the connection is dialled again with backoff until Close
// (amqpconn.Conn), and then the bus consumes its events queue and serves
// its tools again: a module on AMQP rides out a broker restart as one on
// NATS does (nats.go reconnects by itself). A call made while the bus is
// away waits for it within the call's context.
type Bus struct {
	cfg        link.Config
	node, name string
	log        *slog.Logger
	conn       *amqpconn.Conn

	// Idle channels, each used by one call at a time.
	publishers *amqpconn.Pool[*amqpconn.Publisher]
	callers    *amqpconn.Pool[*caller]

	// mu guards the consumers and serialises Consume, Serve and resume,
	// which open channels while they hold it.
	mu sync.Mutex
	// consuming says Consume was called: a new connection consumes again.
	consuming bool
	consumer  *amqpconn.Consumer
	// served are the tools served, in order, each with its consumer.
	served []*served
}

// served is one tool served and the consumer of the connection in use.
type served struct {
	tool    string
	handler link.ToolFunc
	c       *amqpconn.Consumer
}

var _ link.Transport = (*Bus)(nil)

// Dial connects as cfg.Credential (amqpconn.Dial: amqps:// only, the
// certificate pinned, the virtual host the URL's path names, else
// wire.AMQPVhost).
func Dial(ctx context.Context, cfg link.Config) (link.Transport, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = link.DefaultTimeout
	}
	cred := cfg.Credential
	b := &Bus{cfg: cfg, node: cred.Node, name: cred.Module, log: cfg.Logger}
	conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Timeout: cfg.Timeout, Vhost: wire.AMQPVhost, Logger: cfg.Logger, Resume: b.resume})
	if err != nil {
		return nil, err
	}
	b.conn = conn
	b.publishers = amqpconn.NewPool(conn.OpenPublisher)
	b.callers = amqpconn.NewPool(b.openCaller)
	return b, nil
}

// resume consumes the events queue and serves every tool again on the new
// connection. The old events consumer is waited for first, since the SDK is
// handed deliveries by one goroutine at a time. What cannot be resumed is
// logged: the mesh no longer declares it, and a later Consume or Serve
// would be refused the same way.
func (b *Bus) resume() {
	b.mu.Lock()
	old := b.consumer
	b.mu.Unlock()
	if old != nil {
		<-old.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn.CheckOpen() != nil {
		return
	}
	if b.consuming {
		c, err := b.startConsumer(ctx)
		if err != nil {
			b.log.Error("events not consumed again after reconnecting", "err", err)
		} else {
			b.consumer = c
		}
	}
	for _, sv := range b.served {
		c, err := b.startServer(ctx, sv.tool, sv.handler)
		if err != nil {
			b.log.Error("tool not served again after reconnecting", "tool", sv.tool, "err", err)
			continue
		}
		sv.c = c
	}
}

// Close stops consuming (the deliveries already fetched are still handed
// to the SDK and settled), lets the tool calls in flight be answered,
// then closes the connection. It waits at most the configured timeout
// for the consumers. A reconnect in progress is abandoned.
func (b *Bus) Close() error {
	deadline := time.Now().Add(b.cfg.Timeout)
	var errs []error
	err := b.conn.Close(deadline, func() {
		// After any Consume, Serve or resume in progress: what they
		// started is stopped too.
		b.mu.Lock()
		stops := []*amqpconn.Consumer{b.consumer}
		for _, sv := range b.served {
			stops = append(stops, sv.c)
		}
		b.mu.Unlock()
		for _, c := range stops {
			if c != nil {
				if err := c.Stop(deadline); err != nil {
					errs = append(errs, err)
				}
			}
		}
		b.publishers.Close()
		b.callers.Close()
	})
	return errors.Join(append(errs, err)...)
}
