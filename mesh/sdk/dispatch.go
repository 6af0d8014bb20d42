package sdk

import (
	"errors"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// settleWindow is how long after a Subscribe a delivery that no handler
// wants is held rather than acknowledged. A module subscribes pattern by
// pattern, and its consumer starts delivering at the first: without the
// window, a backlog (the events emitted while it was restarting, exactly
// the ones the durable consumer exists to keep) would be acknowledged as
// unwanted before the module's second Subscribe had said it wants them.
const settleWindow = 2 * time.Second

// deliver is what a binding calls for each delivery, one at a time. It
// returns once the delivery has been handled and settled, or held.
func (m *Module) deliver(d link.Delivery) {
	select {
	case m.in <- d:
		<-m.handled
	case <-m.done:
		// Closed without a complete drain: left unsettled, the broker
		// redelivers it after its ack wait.
	}
}

// dispatch is the one goroutine that runs event handlers, so that they
// run one at a time and the memory of handled ids needs no lock; held
// deliveries are released on it too.
func (m *Module) dispatch() {
	defer close(m.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		select {
		case d := <-m.in:
			m.handle(d)
			m.handled <- struct{}{}
		case <-timer.C:
			armed = false
			m.release()
		case <-m.giveBack:
			m.giveBackHeld()
		case <-m.stop:
			timer.Stop()
			m.giveBackHeld() // only if giveBack timed out: the nak may fail
			return
		}
		if len(m.held) > 0 && !armed {
			timer.Reset(time.Until(m.settleDeadline()))
			armed = true
		}
	}
}

// giveBackHeld naks the held deliveries: the module is closing, what it
// held is still unwanted, and is given back while the connection is still
// open, for the module's next run to decide with all its patterns.
func (m *Module) giveBackHeld() {
	for _, d := range m.held {
		m.settle(d.Nak(0), "nak", d.Key())
	}
	m.held = nil
}

// stopDispatch ends the dispatcher once the binding delivers no more.
func (m *Module) stopDispatch() {
	close(m.stop)
	<-m.done
}

func (m *Module) settleDeadline() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.settleBy
}

// release handles the held deliveries again once the window has closed:
// with every pattern subscribed by now, what is still unwanted is acked.
func (m *Module) release() {
	if time.Until(m.settleDeadline()) > 0 {
		return // a Subscribe reopened the window; the timer is re-armed
	}
	held := m.held
	m.held = nil
	for _, d := range held {
		m.handle(d)
	}
}

// handle decides what becomes of one delivery: refuse it, hold it, ack
// it unhandled, ack a duplicate, or run the matching handlers and ack or
// nak by their outcome.
func (m *Module) handle(d link.Delivery) {
	key := d.Key()
	e, err := decode(key, d.Message())
	if err != nil {
		m.refuse(d, key, err)
		return
	}
	hs, closing := m.handlers(key)
	if len(hs) == 0 {
		if time.Now().Before(m.settleDeadline()) {
			if closing {
				m.settle(d.Nak(0), "nak", key)
				return
			}
			m.held = append(m.held, d)
			return
		}
		// Wanted by the consumer's filters but by no handler here: acked,
		// or it would be redelivered until it expires.
		m.settle(d.Ack(), "ack", key)
		return
	}
	if m.seen.has(e.Source, e.ID) {
		m.settle(d.Ack(), "ack", key)
		return
	}
	n, limit := d.Attempt()
	delay := redeliveryDelay(n, limit, m.redelivery)
	failed := false
	for _, h := range hs {
		if err := runEvent(m.ctx, h, e); err != nil {
			attrs := []any{"key", key, "event", e.ID, "delivery", n, "again_in", delay.String()}
			m.log.Warn("event handler failed; asking for the event again", append(attrs, failure(err)...)...)
			failed = true
		}
	}
	if failed {
		// Every handler runs again on redelivery: at least once, not once
		// per handler.
		m.settle(d.Nak(delay), "nak", key)
		return
	}
	m.seen.add(e.Source, e.ID)
	m.settle(d.Ack(), "ack", key)
}

// refuse terminates a delivery that is not an acceptable event, for good
// (a redelivery would carry the same headers and body), and logs it with
// what was refused and how many the module has refused so far. Terminated
// on NATS with wire.RefusalReason, the server also publishes its
// MSG_TERMINATED advisory with that reason, which the controller's user
// may hear: the account of the refusal from outside the module. Rejected
// on AMQP, the queue dead-letters it with the reason "rejected".
func (m *Module) refuse(d link.Delivery, key string, err error) {
	m.refused++
	attrs := []any{"key", key, "part", wire.RefusedPart(err), "refusals", m.refused, "err", err}
	var he *wire.HeaderError
	if errors.As(err, &he) {
		attrs = append(attrs, "header", he.Header)
	}
	m.log.Error("envelope refused", attrs...)
	m.settle(d.Term(wire.RefusalReason(err)), "term", key)
}

func (m *Module) settle(err error, how, key string) {
	if err != nil {
		m.log.Error("settle delivery", "how", how, "key", key, "err", err)
	}
}
