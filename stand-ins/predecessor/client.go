package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// The predecessor's own topology in its own virtual host, declared by
// itself on every connection (idempotently): what a client of the bus
// the mesh had would have.
const (
	eventsExchange = "legacy.events"
	readingsQueue  = "legacy.readings"
	readingsKey    = "reading.seq"
	rpcQueue       = "legacy.rpc"
	// directReplyTo is RabbitMQ's pseudo-queue for direct reply-to.
	directReplyTo = "amq.rabbitmq.reply-to"
)

// config is what the flags say.
type config struct {
	url         string
	name        string
	rate        float64       // messages published per second
	callRate    float64       // calls made per second
	callTimeout time.Duration // a call unanswered for this long timed out
	retry       time.Duration // wait before dialling again after a disconnect
}

// predecessor is the stand-in's client and everything it counts.
type predecessor struct {
	cfg config
	log *slog.Logger

	mu      sync.Mutex
	counts  report.Counts
	seq     sequence
	next    uint64               // the last sequence number published
	calls   uint64               // the last call's number
	pending map[string]time.Time // calls waiting for an answer, by correlation id, with their deadline
	up      bool                 // a connection is open
}

func newPredecessor(cfg config, user, vhost string, log *slog.Logger) *predecessor {
	return &predecessor{
		cfg:     cfg,
		log:     log,
		counts:  report.Counts{Name: cfg.name, User: user, Vhost: vhost, Started: time.Now().UTC()},
		pending: map[string]time.Time{},
	}
}

// snapshot is the counts now.
func (p *predecessor) snapshot() report.Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	c.Received, c.Duplicated, c.Lost, c.Highest = p.seq.received, p.seq.dups, p.seq.lost(), p.seq.highest
	c.Connections = append([]report.Connection(nil), c.Connections...)
	c.Disconnects = append([]report.Disconnect(nil), c.Disconnects...)
	return c
}

// connected reports whether a connection is open now.
func (p *predecessor) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

// run keeps one connection open until ctx ends, opening another only
// when the broker (or the network) ended the one it had, and counts
// unanswered calls as timed out as their deadlines pass.
func (p *predecessor) run(ctx context.Context) error {
	go p.sweep(ctx)
	for {
		err := p.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn("predecessor: disconnected", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.cfg.retry):
		}
	}
}

// session is one connection's life: it dials, declares the topology and
// runs the four clients until the connection ends or ctx does.
func (p *predecessor) session(ctx context.Context) error {
	conn, err := amqp.DialConfig(p.cfg.url, amqp.Config{
		Properties: amqp.Table{"connection_name": p.cfg.name},
		Heartbeat:  10 * time.Second,
		Dial:       amqp.DefaultDial(10 * time.Second),
	})
	if err != nil {
		p.disconnected(0, fmt.Sprintf("dial: %v", err))
		return err
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	port := 0
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		port = a.Port
	}
	if err := declare(conn); err != nil {
		p.disconnected(0, err.Error())
		return err
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 4)
	var wg sync.WaitGroup
	for _, client := range []func(context.Context, *amqp.Connection) error{p.publish, p.consume, p.respond, p.call} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := client(sctx, conn); err != nil && sctx.Err() == nil {
				failed <- err
			}
		}()
	}
	p.mu.Lock()
	p.counts.Connections = append(p.counts.Connections, report.Connection{At: time.Now().UTC(), LocalPort: port})
	p.up = true
	p.mu.Unlock()
	p.log.Info("predecessor is connected", "name", p.cfg.name, "local_port", port)

	var end error
	select {
	case <-ctx.Done():
	case e, ok := <-closed:
		if ok && e != nil {
			p.disconnected(e.Code, e.Reason)
			end = e
		} else {
			p.disconnected(0, "connection closed without a reason")
			end = errors.New("connection closed")
		}
	case err := <-failed:
		p.disconnected(0, err.Error())
		end = err
	}
	cancel()
	conn.Close()
	wg.Wait()
	return end
}

func (p *predecessor) disconnected(code int, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	p.counts.Disconnects = append(p.counts.Disconnects, report.Disconnect{At: time.Now().UTC(), Code: code, Reason: reason})
}

// declare asserts the predecessor's exchange, queues and binding.
func declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(eventsExchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", eventsExchange, err)
	}
	if _, err := ch.QueueDeclare(readingsQueue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare queue %s: %w", readingsQueue, err)
	}
	if err := ch.QueueBind(readingsQueue, "reading.#", eventsExchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", readingsQueue, err)
	}
	if _, err := ch.QueueDeclare(rpcQueue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare queue %s: %w", rpcQueue, err)
	}
	return nil
}

// publish sends sequence-numbered, persistent, mandatory messages at the
// configured rate, with publisher confirms.
func (p *predecessor) publish(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("publisher: confirm mode: %w", err)
	}
	// Both are drained until the channel closes them: an undrained one
	// would block the connection.
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1024))
	returns := ch.NotifyReturn(make(chan amqp.Return, 64))
	go func() {
		for c := range confirms {
			p.mu.Lock()
			if c.Ack {
				p.counts.Confirmed++
			} else {
				p.counts.Nacked++
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		for range returns {
			p.mu.Lock()
			p.counts.Returned++
			p.mu.Unlock()
		}
	}()
	tick := time.NewTicker(every(p.cfg.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		p.mu.Lock()
		p.next++
		n := p.next
		p.mu.Unlock()
		id := strconv.FormatUint(n, 10)
		err := ch.PublishWithContext(ctx, eventsExchange, readingsKey, true, false, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte(id),
		})
		if err != nil {
			return fmt.Errorf("publisher: publish %d: %w", n, err)
		}
		p.mu.Lock()
		p.counts.Sent++
		p.mu.Unlock()
	}
}

// consume reads the messages back and accounts for their sequence
// numbers.
func (p *predecessor) consume(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(256, 0, false); err != nil {
		return fmt.Errorf("consumer: qos: %w", err)
	}
	ds, err := ch.ConsumeWithContext(ctx, readingsQueue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consumer: consume %s: %w", readingsQueue, err)
	}
	for d := range ds {
		n, err := strconv.ParseUint(string(d.Body), 10, 64)
		p.mu.Lock()
		if err == nil {
			p.seq.add(n)
		}
		p.mu.Unlock()
		if err := d.Ack(false); err != nil {
			return fmt.Errorf("consumer: ack: %w", err)
		}
	}
	return errors.New("consumer: deliveries ended")
}

// respond is the predecessor's own responder: it answers each call with
// its body, to the reply-to the call names.
func (p *predecessor) respond(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("responder: %w", err)
	}
	defer ch.Close()
	ds, err := ch.ConsumeWithContext(ctx, rpcQueue, "", true, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("responder: consume %s: %w", rpcQueue, err)
	}
	for d := range ds {
		err := ch.PublishWithContext(ctx, "", d.ReplyTo, false, false, amqp.Publishing{
			CorrelationId: d.CorrelationId, ContentType: d.ContentType, Body: d.Body,
		})
		if err != nil {
			return fmt.Errorf("responder: answer: %w", err)
		}
	}
	return errors.New("responder: deliveries ended")
}

// call asks the responder at the configured rate through direct
// reply-to and counts each answer that comes within the timeout.
func (p *predecessor) call(ctx context.Context, conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("caller: %w", err)
	}
	defer ch.Close()
	// Direct reply-to: consume the pseudo-queue, with no ack, before the
	// first request names it.
	answers, err := ch.ConsumeWithContext(ctx, directReplyTo, "", true, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("caller: consume %s: %w", directReplyTo, err)
	}
	tick := time.NewTicker(every(p.cfg.callRate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case a, ok := <-answers:
			if !ok {
				return errors.New("caller: answers ended")
			}
			p.mu.Lock()
			if deadline, ok := p.pending[a.CorrelationId]; ok {
				delete(p.pending, a.CorrelationId)
				if time.Now().Before(deadline) {
					p.counts.Answered++
				} else {
					p.counts.TimedOut++
				}
			}
			p.mu.Unlock()
		case <-tick.C:
			p.mu.Lock()
			p.calls++
			id := "call-" + strconv.FormatUint(p.calls, 10)
			p.pending[id] = time.Now().Add(p.cfg.callTimeout)
			p.counts.Calls++
			p.mu.Unlock()
			err := ch.PublishWithContext(ctx, "", rpcQueue, false, false, amqp.Publishing{
				CorrelationId: id, ReplyTo: directReplyTo, ContentType: "text/plain", Body: []byte(id),
			})
			if err != nil {
				return fmt.Errorf("caller: ask %s: %w", id, err)
			}
		}
	}
}

// sweep counts the calls whose deadline passed unanswered.
func (p *predecessor) sweep(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p.mu.Lock()
			for id, deadline := range p.pending {
				if now.After(deadline) {
					delete(p.pending, id)
					p.counts.TimedOut++
				}
			}
			p.mu.Unlock()
		}
	}
}

// every is the interval of a rate per second.
func every(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}
