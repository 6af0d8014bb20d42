package amqpplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// notRecordedRetry is how long a dead letter deliver did not record is
// held before it is given back to be handed again: a deliver that keeps
// failing is not handed it in a loop as fast as the broker goes.
const notRecordedRetry = time.Second

// FollowDead consumes wire.QueueDead, one letter at a time, and takes
// each away once deliver has recorded it; one deliver did not record is
// given back after notRecordedRetry (at once when the follower stops),
// and comes again. AMQP keeps no positions, so after means nothing here: the
// queue holds exactly what was not recorded yet. The controller takes the
// letters rather than reading and giving them back: a queue gives back
// what is requeued at once, to be read again at once, and a delivery left
// unsettled is taken from its channel by the broker's consumer timeout
// (30 minutes on RabbitMQ 3.10). The store is the record; the queue's
// message TTL only bounds what waits while no controller runs.
//
// What is not a dead letter is logged and taken away: a message put into
// the queue by name (the default exchange, which every module serving a
// tool may write, x-death and all), and an event its module terminated
// (x-death reason "rejected"), which NATS records as no dead letter
// either.
func (c *Controller) FollowDead(ctx context.Context, _ uint64, deliver func(plane.Dead) error) (stop func(), err error) {
	maxDeliver := c.o.MaxDeliver
	if maxDeliver <= 0 {
		maxDeliver = amqpdefs.DefaultMaxDeliver
	}
	f := newFeed(c.Mesh, c.log, 1, []string{wire.QueueDead}, func(d amqp.Delivery, rq *amqpconn.Requeues) {
		x, err := readDead(d, maxDeliver)
		if err != nil {
			queue, reason := newestDeath(d)
			c.log.Warn("the dead letters' queue holds what is not a dead letter; taken away", "exchange", d.Exchange, "routing_key", d.RoutingKey,
				"event", d.Headers[wire.HeaderEventID], "queue", queue, "reason", reason, "why", err)
			if err := d.Ack(false); err != nil {
				c.log.Warn("take away what is not a dead letter", "err", err)
			}
			return
		}
		if err := deliver(x); err != nil {
			if err := rq.After(d, notRecordedRetry); err != nil && !errors.Is(err, amqp.ErrClosed) {
				c.log.Warn("give back a dead letter not recorded", "err", err)
			}
			return
		}
		if err := d.Ack(false); err != nil {
			// The channel went: the broker gives the letter back, and
			// the next record of it replaces this one.
			c.log.Warn("take away a dead letter recorded", "event", x.EventID, "err", err)
		}
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}

// readDead reads a dead letter from what RabbitMQ's dead-lettering put
// in the queue: the newest x-death entry names the events queue it died
// in (the consumer) and why, the routing key is the event's, its headers
// the emitter's. A quorum queue tells no consumer how often it delivered a
// message, and keeps no count in the letter: it gave up after its
// delivery limit, which the controller's assertion declared from
// maxDeliver (a queue declared otherwise is drift the assertion refuses).
func readDead(d amqp.Delivery, maxDeliver int) (plane.Dead, error) {
	if d.Exchange != wire.ExchangeDead {
		return plane.Dead{}, fmt.Errorf("it came through exchange %q, not %s, which the broker alone publishes to", d.Exchange, wire.ExchangeDead)
	}
	death := newest(d)
	if death == nil {
		return plane.Dead{}, fmt.Errorf("no %s header", wire.AMQPDeath)
	}
	queue, reason := newestDeath(d)
	if reason != wire.DeathDeliveryLimit {
		return plane.Dead{}, fmt.Errorf("it died for %q, not at its delivery limit", reason)
	}
	node, module, ok := wire.EventsQueueOwner(queue)
	if !ok {
		return plane.Dead{}, fmt.Errorf("it died in queue %q, no module's events queue", queue)
	}
	x := plane.Dead{Consumer: wire.ModuleConsumer(node, module), Deliveries: maxDeliver, At: time.Now().UTC()}
	if at, ok := death[wire.DeathTime].(time.Time); ok && !at.IsZero() {
		x.At = at.UTC()
	}
	if emitter, key, err := wire.EventKeyFromRoutingKey(d.RoutingKey); err == nil {
		x.Subject = wire.EventSubject(emitter, key)
	}
	x.EventID = wire.HeaderValue(wire.HeadersFromTable(d.Headers, d.ContentType), wire.HeaderEventID)
	return x, nil
}

// newest is the newest entry of a letter's x-death: RabbitMQ puts the
// death that brought it here first.
func newest(d amqp.Delivery) amqp.Table {
	deaths, _ := d.Headers[wire.AMQPDeath].([]any)
	if len(deaths) == 0 {
		return nil
	}
	death, _ := deaths[0].(amqp.Table)
	return death
}

// newestDeath is the queue a letter died in last, and why.
func newestDeath(d amqp.Delivery) (queue, reason string) {
	death := newest(d)
	queue, _ = death[wire.DeathQueue].(string)
	reason, _ = death[wire.DeathReason].(string)
	return queue, reason
}
