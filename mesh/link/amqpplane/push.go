package amqpplane

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// pusher sends an operator's push as the controller's control-plane user.
type pusher struct {
	c *Controller
}

// DialPusher connects as cred (the controller's user in the control
// plane's virtual host) to send pushes.
func DialPusher(ctx context.Context, cred wire.Credential, o HostOptions) (plane.Pusher, error) {
	conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Timeout: o.Timeout, Vhost: wire.AMQPControlVhost, Address: o.Address, Logger: o.Logger})
	if err != nil {
		return nil, loginErr(err)
	}
	c := &Controller{o: ControllerOptions{Timeout: o.Timeout}, Control: conn, publishers: amqpconn.NewPool(conn.OpenPublisher), log: conn.Logger()}
	if c.o.Timeout <= 0 {
		c.o.Timeout = 10 * time.Second
	}
	return pusher{c: c}, nil
}

// Push puts the push in its queue, id as message-id, and returns once the
// broker confirmed it; AMQP keeps no position, so it returns 0.
func (p pusher) Push(ctx context.Context, id string, body []byte) (uint64, error) {
	return 0, p.c.publish(ctx, wire.ExchangeControl, wire.SubjectPush, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, Body: body,
	})
}

func (p pusher) Close() error {
	return p.c.Control.Close(time.Now().Add(p.c.o.Timeout), p.c.publishers.Close)
}
