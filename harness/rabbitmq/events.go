package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The broker's own record of connections: the event exchange plugin
// (rabbitmq_event_exchange, enabled in our image) publishes each of the
// broker's internal events on EventExchange, in the virtual host "/", with
// the event's properties as headers and an empty body.
//
// Measured on RabbitMQ 3.10.8 (mesh-rabbitmq): a connection opened and
// closed gives user.authentication.success, connection.created (user,
// vhost, pid, the broker's name "peer -> local", user_provided_name: the
// client's connection_name) and connection.closed (pid, name,
// user_provided_name; no user). A refused login gives
// user.authentication.failure (the user, the broker's name as
// connection_name, no client name) and, 3 s later (the broker's silent
// close delay), connection.closed with the client's name; a login refused
// its virtual host gives success, then connection.closed, with no
// connection.created. Every one of them carries the client's name only on
// connection.created and connection.closed.
//
// The broker lists only the connections still open (rabbitmqctl
// list_connections); these events are how it can be asked, from outside,
// about the ones it closed and refused, as NATS's /connz?state=closed is.
// The broker's log says as much ("user 'x' authenticated"), but as lines
// meant for people, whose wording changes between releases and which
// name a refused login's client nowhere: the events are data.
// EventExchange and EventVhost are where the plugin publishes (spelled in
// mesh/wire).
const (
	EventExchange = wire.ExchangeEvent
	EventVhost    = wire.EventVhost
)

// ConnectionEventKeys are the routing keys of the events about
// connections and logins.
var ConnectionEventKeys = wire.ConnectionEventKeys()

// Event is one event the broker published on EventExchange: its routing
// key and its properties.
type Event struct {
	Key     string
	Headers map[string]any
}

// eventsKept bounds what the events queue holds between two reads (the
// oldest go first), as the NATS server bounds its closed connections
// (10,000 by default): a bed run makes a few thousand connections.
const eventsKept = 100_000

// EventLog keeps the broker's events in a queue of the broker's own, so
// that none is lost while nobody reads it (between two steps, or while
// the reader's connection is away), and takes them out when asked; it
// keeps every event taken, for the next ask. Its methods are safe for
// concurrent use.
type EventLog struct {
	c     *RabbitMQContainer
	user  string
	queue string

	mu    sync.Mutex
	taken []Event
}

// KeepEvents declares queue, durable, in EventVhost and binds it to
// EventExchange with keys, as user (given by WithUser, with configure,
// write and read on queue and read on EventExchange), through the AMQP
// port published on this host's loopback. Only the events that come after
// it are kept.
func (c *RabbitMQContainer) KeepEvents(ctx context.Context, user, queue string, keys ...string) (*EventLog, error) {
	l := &EventLog{c: c, user: user, queue: queue}
	err := l.on(ctx, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{wire.ArgMaxLength: eventsKept}); err != nil {
			return fmt.Errorf("declare %s: %w", queue, err)
		}
		for _, k := range keys {
			if err := ch.QueueBind(queue, k, EventExchange, false, nil); err != nil {
				return fmt.Errorf("bind %s to %s with %s (is rabbitmq_event_exchange enabled?): %w", queue, EventExchange, k, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("keep the broker's events: %w", err)
	}
	return l, nil
}

// Events takes every event the queue holds and returns all the events
// taken since KeepEvents, oldest first. An event the broker is still
// publishing may come at the next call.
func (l *EventLog) Events(ctx context.Context) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []Event
	err := l.on(ctx, func(ch *amqp.Channel) error {
		var last uint64
		for ctx.Err() == nil {
			d, ok, err := ch.Get(l.queue, false)
			if err != nil {
				return fmt.Errorf("take from %s: %w", l.queue, err)
			}
			if !ok {
				break
			}
			got = append(got, Event{Key: d.RoutingKey, Headers: d.Headers})
			last = d.DeliveryTag
		}
		if last == 0 {
			return ctx.Err()
		}
		// Taken away once kept (what the context cut short is taken at the
		// next call). An ack lost gives them again, which a reader must
		// bear: a connection's events name it by its pid.
		return ch.Ack(last, true)
	})
	if err != nil {
		return nil, fmt.Errorf("take the broker's events: %w", err)
	}
	l.taken = append(l.taken, got...)
	return slices.Clone(l.taken), nil
}

// closeWithin bounds closing the reader's connection.
const closeWithin = 5 * time.Second

// on runs f on a channel of a connection of its own, made for the call:
// the port is asked for each time (a restarted container may publish
// another), and nothing stays open between calls.
func (l *EventLog) on(ctx context.Context, f func(*amqp.Channel) error) error {
	url, err := l.c.AmqpURLFor(ctx, l.user, EventVhost)
	if err != nil {
		return err
	}
	cfg := amqp.Config{Properties: amqp.NewConnectionProperties()}
	cfg.Properties.SetClientConnectionName("harness: " + l.user)
	if dl, ok := ctx.Deadline(); ok {
		cfg.Dial = amqp.DefaultDial(time.Until(dl))
	}
	conn, err := amqp.DialConfig(url, cfg)
	if err != nil {
		return fmt.Errorf("dial as %s: %w", l.user, err)
	}
	// A call on a broker frozen after the dial never returns
	// (RABBITMQ-NOTES.md): the context's end closes the connection under
	// it, within a deadline of its own.
	closeConn := func() { _ = conn.CloseDeadline(time.Now().Add(closeWithin)) }
	stop := context.AfterFunc(ctx, closeConn)
	defer func() {
		if stop() {
			closeConn()
		}
	}()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	return f(ch)
}
