package linktest

import (
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
)

// deadLetters: an event a module's consumer refused until the bus gave
// up on it is followed as a dead letter naming the consumer, the event
// and the deliveries made, in the order the bus recorded them; following
// again after one starts after it.
func deadLetters(t *testing.T, bus Bus) {
	dl, ok := bus.(DeadLettering)
	if !ok {
		t.Skip("the bus cannot make a module's event a dead letter (capability linktest.DeadLettering)")
	}
	c := bus.Controller()
	follow := func(after uint64) <-chan plane.Dead {
		t.Helper()
		got := make(chan plane.Dead, 16)
		stop, err := c.FollowDead(ctxT(t), after, func(d plane.Dead) {
			select {
			case got <- d:
			default:
				t.Errorf("more than %d dead letters unread", cap(got))
			}
		})
		if err != nil {
			t.Fatalf("expected the dead letters followed, got %v", err)
		}
		t.Cleanup(stop)
		return got
	}
	await := func(got <-chan plane.Dead, event string) plane.Dead {
		t.Helper()
		select {
		case d := <-got:
			if d.EventID != event {
				t.Fatalf("expected the dead letter of event %s, got %+v", event, d)
			}
			return d
		case <-time.After(20 * time.Second):
			t.Fatalf("expected the dead letter of event %s within 20s, got none", event)
			return plane.Dead{}
		}
	}
	got := follow(0)
	consumer, subject, n := dl.Poison("poison-1")
	first := await(got, "poison-1")
	if first.Consumer != consumer || first.Subject != subject || first.Deliveries != n || first.At.IsZero() {
		t.Fatalf("expected consumer %s given up on %s after %d deliveries, at a time, got %+v", consumer, subject, n, first)
	}
	dl.Poison("poison-2")
	second := await(got, "poison-2")
	if first.Position == 0 {
		t.Log("following after a position not tried: the bus keeps no positions of dead letters")
		return
	}
	if second.Position <= first.Position {
		t.Fatalf("expected the second dead letter after the first's position %d, got %d", first.Position, second.Position)
	}
	if again := await(follow(first.Position), "poison-2"); again.Position != second.Position {
		t.Fatalf("expected following after %d to start at %d, got %d", first.Position, second.Position, again.Position)
	}
}
