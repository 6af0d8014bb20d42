package amqpplane

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// heldSubjects are the control subjects whose messages the controller
// handles and the queues keep for it (what CONTROL captures on NATS):
// the enrolments, the build outcomes, the pushes, each node's reports,
// each repository's announcements.
func heldSubjects(m *meshdesc.Mesh) []string {
	out := []string{wire.SubjectEnrol, wire.SubjectBuilt, wire.SubjectPush}
	for _, n := range m.Nodes {
		out = append(out, wire.NodeReport(n.Name))
	}
	for _, s := range m.Sources {
		out = append(out, wire.SourceChanged(s.Name))
	}
	return out
}

// Consume consumes every held subject's queue of the description last
// asserted, each on a channel of its own with at most max unsettled, and
// hands deliver one message at a time from them all. A consumer whose
// channel or connection was lost consumes again once the connection is
// back. stop cancels the consumers (what was fetched is still handed
// over), gives back at once what waits out a hold, and returns once
// deliver is no longer called.
func (c *Controller) Consume(ctx context.Context, max int, deliver func(plane.ControlMsg)) (stop func(), err error) {
	m, err := c.mesh()
	if err != nil {
		return nil, err
	}
	var queues []string
	for _, s := range heldSubjects(m) {
		q, err := wire.ControlQueue(s)
		if err != nil {
			return nil, err
		}
		queues = append(queues, q)
	}
	f := newFeed(c.Control, c.log, max, queues, func(d amqp.Delivery, rq *amqpconn.Requeues) {
		deliver(controlMsg{d: d, requeues: rq})
	})
	if err := f.start(ctx); err != nil {
		f.stop()
		return nil, err
	}
	return f.stop, nil
}

// controlMsg is a delivery of a control subject's queue.
type controlMsg struct {
	d        amqp.Delivery
	requeues *amqpconn.Requeues
}

// Subject is the routing key: everything is sent into the control plane
// with the wire subject as its key.
func (m controlMsg) Subject() string  { return m.d.RoutingKey }
func (m controlMsg) ID() string       { return m.d.MessageId }
func (m controlMsg) Position() uint64 { return 0 }
func (m controlMsg) Data() []byte     { return m.d.Body }

// Attempt is the quorum queue's delivery count plus one.
func (m controlMsg) Attempt() int { return attempt(m.d) }

func (m controlMsg) Ack(context.Context) error { return amqpconn.MapClosed(m.d.Ack(false)) }
func (m controlMsg) AckLater() error           { return amqpconn.MapClosed(m.d.Ack(false)) }
func (m controlMsg) Hold(delay time.Duration) error {
	return m.requeues.After(m.d, delay)
}

// Term drops the message: the control queues have no dead-letter
// exchange (the controller counted the refusal in its store).
func (m controlMsg) Term(string) error { return amqpconn.MapClosed(m.d.Reject(false)) }

// attempt reads a quorum queue's x-delivery-count (the times the message
// was returned before), plus one.
func attempt(d amqp.Delivery) int {
	switch n := d.Headers[wire.AMQPDeliveryCount].(type) {
	case int64:
		return int(n) + 1
	case int32:
		return int(n) + 1
	case int:
		return n + 1
	case string:
		if v, err := strconv.Atoi(n); err == nil {
			return v + 1
		}
	}
	return 1
}

// feed consumes a set of queues of one connection and hands their
// deliveries to one function, one at a time.
type feed struct {
	conn    *amqpconn.Conn
	log     *slog.Logger
	max     int
	queues  []string
	deliver func(amqp.Delivery, *amqpconn.Requeues)
	// autoAck consumes without settlements (heartbeats).
	autoAck bool

	serial  chan struct{} // one deliver at a time across the queues
	stopped chan struct{}

	mu        sync.Mutex // the consumers: resume replaces one that ended
	consumers []*amqpconn.Consumer
}

func newFeed(conn *amqpconn.Conn, log *slog.Logger, max int, queues []string, deliver func(amqp.Delivery, *amqpconn.Requeues)) *feed {
	return &feed{conn: conn, log: log, max: max, queues: queues, deliver: deliver, serial: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// start consumes every queue; a queue that is not there is plane.ErrMissing
// naming it.
func (f *feed) start(ctx context.Context) error {
	for _, q := range f.queues {
		c, err := f.consume(ctx, q)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.consumers = append(f.consumers, c)
		f.mu.Unlock()
	}
	go f.resume()
	return nil
}

func (f *feed) consume(ctx context.Context, queue string) (*amqpconn.Consumer, error) {
	ch, err := f.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var deliveries <-chan amqp.Delivery
	err = amqpconn.Bounded(ctx, ch, func() error {
		if f.max > 0 {
			if err := ch.Qos(f.max, 0, false); err != nil {
				return err
			}
		}
		var err error
		deliveries, err = ch.Consume(queue, queue, f.autoAck, false, false, false, nil)
		return err
	})
	if err != nil {
		_ = ch.Close()
		if amqpconn.BrokerCode(err) == wire.AMQPNotFound {
			return nil, fmt.Errorf("%w: queue %s: %w", plane.ErrMissing, queue, err)
		}
		return nil, fmt.Errorf("consume %s: %w", queue, amqpconn.Refused(err))
	}
	c := amqpconn.NewConsumer(ch, closed, deliveries, queue, f.log)
	if !f.autoAck {
		c.Requeues = amqpconn.NewRequeues(f.log)
	}
	go c.Run(func(d amqp.Delivery) {
		f.serial <- struct{}{}
		defer func() { <-f.serial }()
		f.deliver(d, c.Requeues)
	})
	return c, nil
}

// resume consumes again each queue whose consumer ended with its channel
// (a connection lost, a queue deleted and made again), until stop.
func (f *feed) resume() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-f.stopped:
			return
		case <-tick.C:
		}
		f.mu.Lock()
		for i, c := range f.consumers {
			select {
			case <-c.Done():
			default:
				continue
			}
			select {
			case <-f.stopped:
				f.mu.Unlock()
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			nc, err := f.consume(ctx, f.queues[i])
			cancel()
			if err != nil {
				f.log.Warn("a queue is not consumed again yet", "queue", f.queues[i], "err", err)
				continue
			}
			f.consumers[i] = nc
		}
		f.mu.Unlock()
	}
}

// stop ends every consumer: what was fetched is handed over, held
// deliveries are given back at once.
func (f *feed) stop() {
	close(f.stopped)
	deadline := time.Now().Add(10 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.consumers {
		if err := c.Stop(deadline); err != nil {
			f.log.Warn("stop consuming", "err", err)
		}
	}
}
