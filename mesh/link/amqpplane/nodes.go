package amqpplane

import (
	"context"
	"encoding/json"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// perNode is the queue of subject(node) for each node of m, with the
// node it is for.
func perNode(m *meshdesc.Mesh, subject func(string) string) (queues []string, nodes map[string]string, err error) {
	nodes = map[string]string{}
	for _, n := range m.Nodes {
		q, err := wire.ControlQueue(subject(n.Name))
		if err != nil {
			return nil, nil, err
		}
		queues = append(queues, q)
		nodes[q] = n.Name
	}
	return queues, nodes, nil
}

// Hear consumes every node's heartbeat queue (no acknowledgements: a
// heartbeat is worth nothing once read) and calls heard with each whose
// body names the node of its queue; anything else is passed over.
func (c *Controller) Hear(ctx context.Context, heard func(node string, body []byte)) (stop func(), err error) {
	m, err := c.mesh()
	if err != nil {
		return nil, err
	}
	queues, nodes, err := perNode(m, wire.NodeAlive)
	if err != nil {
		return nil, err
	}
	f := newFeed(c.Control, c.log, 0, queues, func(d amqp.Delivery, _ *amqpconn.Requeues) {
		var a struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(d.Body, &a) != nil || a.Node != nodes[d.ConsumerTag] {
			return
		}
		heard(a.Node, d.Body)
	})
	f.autoAck = true
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}

// ServeCredentials consumes every node's credential-request queue and
// answers in that node's answer queue (wire.CredentialsQueue), through
// the default exchange, whatever reply_to the request named: the queue a
// request was read from vouches for the node (only that node's host may
// publish on its routing key, a topic permission), and only that host
// reads the answer queue. No answer goes by direct reply-to: a reply-to
// address can be written from any virtual host (docs/decisions/0009). A
// request whose user-id (which the broker checks against the login) is
// not the node's host is not answered.
func (c *Controller) ServeCredentials(ctx context.Context, answer func(ctx context.Context, node string) []byte) (stop func(), err error) {
	m, err := c.mesh()
	if err != nil {
		return nil, err
	}
	queues, nodes, err := perNode(m, wire.NodeCredentials)
	if err != nil {
		return nil, err
	}
	f := newFeed(c.Control, c.log, 1, queues, func(d amqp.Delivery, _ *amqpconn.Requeues) {
		node := nodes[d.ConsumerTag]
		// Settled first: a request is asked again, never kept.
		_ = d.Ack(false)
		if d.UserId != "" && d.UserId != wire.HostUser(node) {
			c.log.Warn("a credential request as another user; not answered", "node", node, "user", d.UserId)
			return
		}
		body := answer(context.WithoutCancel(ctx), node)
		pctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
		defer cancel()
		err := c.publish(pctx, wire.ExchangeByQueueName, wire.CredentialsQueue(node), amqp.Publishing{
			ContentType: "application/json", CorrelationId: d.CorrelationId, MessageId: wire.NewID(), Body: body,
		})
		if err != nil {
			c.log.Warn("credentials not answered", "node", node, "err", err)
		}
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}
