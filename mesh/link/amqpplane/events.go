package amqpplane

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// The provisioner events are the modules' traffic, in the mesh's virtual
// host: the controller reads them through its connection there
// (controller.mesh) from its own queue, wire.QueueStatus, bound to the
// events exchange with the status keys of any provider (amqpdefs). AMQP
// keeps no positions: the queue hands its events to one consumer at a
// time (single active consumer), one at a time (a prefetch of one), and
// a held delivery, requeued after its delay, goes back to its place in
// the classic queue; so the status is folded in the order the providers
// emitted, and a redelivery is only ever the last event handed over,
// which the status knows by its id.

// EventsOrigin is the zero origin: AMQP keeps no positions and has no
// stream to compare the status with (plane.EventsOrigin).
func (c *Controller) EventsOrigin(context.Context) (plane.EventsOrigin, error) {
	return plane.EventsOrigin{}, nil
}

// FollowEvents consumes wire.QueueStatus, one delivery at a time, and
// hands deliver each event the providers emitted. A delivery that did not
// come through the events exchange was put into the queue by name through
// the default exchange, which every module serving a tool may write: it
// is no provider's event, whatever it says, and is dropped here (the
// queue has no dead-letter exchange), as the server would never have let
// it into EVENTS on NATS. stop returns once deliver is no longer called;
// what was not settled comes again.
func (c *Controller) FollowEvents(ctx context.Context, deliver func(plane.EventMsg)) (stop func(), err error) {
	f := newFeed(c.Mesh, c.log, 1, []string{wire.QueueStatus}, func(d amqp.Delivery, rq *amqpconn.Requeues) {
		subject, ok := eventSubject(d)
		if !ok {
			c.log.Warn("the status queue holds what no provider emitted; dropped", "exchange", d.Exchange, "routing_key", d.RoutingKey, "event", d.Headers[wire.HeaderEventID])
			if err := d.Reject(false); err != nil {
				c.log.Warn("drop a delivery of the status queue", "err", err)
			}
			return
		}
		deliver(eventMsg{d: d, subject: subject, requeues: rq})
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}

// eventSubject is the wire subject of an event published on the events
// exchange: its routing key, which the broker checked against the
// emitter's topic permission, mapped back.
func eventSubject(d amqp.Delivery) (string, bool) {
	if d.Exchange != wire.ExchangeEvents {
		return "", false
	}
	module, key, err := wire.EventKeyFromRoutingKey(d.RoutingKey)
	if err != nil {
		return "", false
	}
	return wire.EventSubject(module, key), true
}

// eventMsg is a delivery of the status queue.
type eventMsg struct {
	d        amqp.Delivery
	subject  string
	requeues *amqpconn.Requeues
}

func (m eventMsg) Position() uint64 { return 0 }
func (m eventMsg) Subject() string  { return m.subject }
func (m eventMsg) Data() []byte     { return m.d.Body }

// Header is the envelope's headers as the emitter set them.
func (m eventMsg) Header() map[string][]string {
	return wire.HeadersFromTable(m.d.Headers, m.d.ContentType)
}

// Ack settles it; AMQP confirms no acknowledgement.
func (m eventMsg) Ack(context.Context) error { return amqpconn.MapClosed(m.d.Ack(false)) }

// Hold keeps it unsettled for delay, then requeues it: with a prefetch of
// one, nothing behind it is handed over meanwhile, and it comes back
// first.
func (m eventMsg) Hold(delay time.Duration) error { return m.requeues.After(m.d, delay) }

// Term drops it: the status queue has no dead-letter exchange.
func (m eventMsg) Term() error { return amqpconn.MapClosed(m.d.Reject(false)) }
