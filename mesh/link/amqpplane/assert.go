package amqpplane

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// declare makes d's exchanges, queues and bindings of vhost exist on
// conn, and returns those it created ("exchange NAME", "queue NAME").
// RabbitMQ answers a declaration whose arguments differ from the
// object's with 406 and closes the channel: that is drift, named.
func declare(ctx context.Context, conn *amqpconn.Conn, vhost string, d amqpdefs.Definitions) (created []string, err error) {
	ch, err := conn.Channel(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ch.Close() }()
	// exists runs a passive declaration on a channel of its own: a 404
	// closes the channel it came on.
	exists := func(passive func(*amqpconn.Channel) error) (bool, error) {
		pch, err := conn.Channel(ctx)
		if err != nil {
			return false, err
		}
		defer func() { _ = pch.Close() }()
		err = amqpconn.Bounded(ctx, pch, func() error { return passive(pch) })
		switch {
		case err == nil:
			return true, nil
		case amqpconn.BrokerCode(err) == wire.AMQPNotFound:
			return false, nil
		}
		return false, amqpconn.Refused(err)
	}
	drift := func(what string, err error) error {
		if amqpconn.BrokerCode(err) == amqp.PreconditionFailed {
			return fmt.Errorf("%w: %s in vhost %s: %w", plane.ErrDrift, what, vhost, err)
		}
		return fmt.Errorf("declare %s in vhost %s: %w", what, vhost, amqpconn.Refused(err))
	}
	for _, e := range d.Exchanges {
		if e.Vhost != vhost {
			continue
		}
		ok, err := exists(func(c *amqpconn.Channel) error {
			return c.ExchangeDeclarePassive(e.Name, e.Type, e.Durable, false, false, false, nil)
		})
		if err != nil {
			return created, err
		}
		if err := amqpconn.Bounded(ctx, ch, func() error {
			return ch.ExchangeDeclare(e.Name, e.Type, e.Durable, false, false, false, amqp.Table(e.Arguments))
		}); err != nil {
			return created, drift("exchange "+e.Name, err)
		}
		if !ok {
			created = append(created, "exchange "+e.Name)
		}
	}
	for _, q := range d.Queues {
		if q.Vhost != vhost {
			continue
		}
		ok, err := exists(func(c *amqpconn.Channel) error {
			_, err := c.QueueDeclarePassive(q.Name, q.Durable, false, false, false, nil)
			return err
		})
		if err != nil {
			return created, err
		}
		if err := amqpconn.Bounded(ctx, ch, func() error {
			_, err := ch.QueueDeclare(q.Name, q.Durable, false, false, false, amqp.Table(q.Arguments))
			return err
		}); err != nil {
			return created, drift("queue "+q.Name, err)
		}
		if !ok {
			created = append(created, "queue "+q.Name)
		}
	}
	for _, b := range d.Bindings {
		if b.Vhost != vhost {
			continue
		}
		if err := amqpconn.Bounded(ctx, ch, func() error {
			return ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, amqp.Table(b.Arguments))
		}); err != nil {
			return created, fmt.Errorf("bind %s to %s with %q in vhost %s: %w", b.Destination, b.Source, b.RoutingKey, vhost, amqpconn.Refused(err))
		}
	}
	return created, nil
}
