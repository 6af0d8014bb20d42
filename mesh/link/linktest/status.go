package linktest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// statusEvents: the status words a provider emits (provisioner.failing
// and provisioner.recovered) reach the controller's status feed, and no
// other event does, with their subject, envelope and body, one at a time
// in the order emitted; a held one comes again no sooner than asked and
// before those behind it; one settled (acknowledged or terminated) does
// not come again, to this follower or the next. The origin says whether
// the bus keeps positions, and the positions agree with it.
func statusEvents(t *testing.T, bus Bus) {
	p, ok := bus.(Provisioning)
	if !ok {
		t.Skip("the bus has no provider to emit status words (capability linktest.Provisioning)")
	}
	c := bus.Controller()
	origin, err := c.EventsOrigin(ctxT(t))
	if err != nil {
		t.Fatalf("expected the events' origin, got %v", err)
	}
	positions := origin != (plane.EventsOrigin{})
	follow := func() (<-chan plane.EventMsg, func()) {
		t.Helper()
		got := make(chan plane.EventMsg, 16)
		stop, err := c.FollowEvents(ctxT(t), func(m plane.EventMsg) {
			select {
			case got <- m:
			default:
				t.Errorf("more than %d status deliveries unread", cap(got))
			}
		})
		if err != nil {
			t.Fatalf("expected the status feed followed, got %v", err)
		}
		var once sync.Once
		stopOnce := func() { once.Do(stop) }
		t.Cleanup(stopOnce)
		return got, stopOnce
	}
	next := func(got <-chan plane.EventMsg, event string) plane.EventMsg {
		t.Helper()
		select {
		case m := <-got:
			if id := wire.HeaderValue(m.Header(), wire.HeaderEventID); id != event {
				t.Fatalf("expected status event %s next, got %s (%s)", event, id, m.Subject())
			}
			if (m.Position() != 0) != positions {
				t.Fatalf("expected a position only on a bus with an origin (%+v), got %d", origin, m.Position())
			}
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("expected status event %s within 20s, got none", event)
			return nil
		}
	}
	settle := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ack := func(m plane.EventMsg) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		settle("ack", m.Ack(ctx))
	}
	failing, _ := json.Marshal(wire.FailingEvent{ConsumerRef: wire.ConsumerRef{Consumer: "logger", Node: "node-b"}, Class: wire.ClassTimeout, Since: time.Now().UTC()})
	recovered, _ := json.Marshal(wire.RecoveredEvent{ConsumerRef: wire.ConsumerRef{Consumer: "logger", Node: "node-b"}, Reason: wire.RecoveredSuccess})
	retirement, _ := json.Marshal(wire.RetirementEvent{Action: wire.RetirementPending, At: time.Now().UTC()})

	got, stop := follow()
	subject := p.Provide(wire.EventProvisionerFailing, "status-1", failing)
	p.Provide(wire.EventProvisionerRecovered, "status-2", recovered)
	p.Provide(wire.EventProvisionerRetirement, "status-x", retirement)
	p.Provide(wire.EventProvisionerFailing, "status-3", failing)

	first := next(got, "status-1")
	if first.Subject() != subject || string(first.Data()) != string(failing) {
		t.Fatalf("expected status-1 on %s with its body, got %s %q", subject, first.Subject(), first.Data())
	}
	const hold = 500 * time.Millisecond
	held := time.Now()
	settle("hold", first.Hold(hold))
	// Nothing behind it is handed over while it is held: it comes first.
	again := next(got, "status-1")
	if since := time.Since(held); since < hold {
		t.Fatalf("expected status-1 again no sooner than %v, it came after %v", hold, since)
	}
	ack(again)
	second := next(got, "status-2")
	if positions && second.Position() <= again.Position() {
		t.Fatalf("expected status-2 after status-1's position %d, got %d", again.Position(), second.Position())
	}
	ack(second)
	// status-x is a provisioner event, not a status word: not handed over.
	settle("term", next(got, "status-3").Term())
	stop()

	got, _ = follow()
	p.Provide(wire.EventProvisionerRecovered, "status-4", recovered)
	ack(next(got, "status-4"))
}
