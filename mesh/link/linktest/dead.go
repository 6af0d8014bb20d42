package linktest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
)

// errNotRecorded is what a body's deliver returns for a dead letter it
// would not record.
var errNotRecorded = errors.New("not recorded")

// deadLetters: an event a module's consumer refused until the bus gave
// up on it is followed as a dead letter naming the consumer, the event
// and the deliveries made, in the order the bus recorded them. A letter
// recorded (deliver returned nil) is not handed to the next follower,
// given the position of the newest recorded (a bus keeping none takes it
// away); one not recorded is.
func deadLetters(t *testing.T, bus Bus) {
	dl, ok := bus.(DeadLettering)
	if !ok {
		t.Skip("the bus cannot make a module's event a dead letter (capability linktest.DeadLettering)")
	}
	c := bus.Controller()
	// follow follows the dead letters after after, each sent on the
	// channel returned and answered with record's answer.
	follow := func(after uint64, record error) (<-chan plane.Dead, func()) {
		t.Helper()
		got := make(chan plane.Dead, 16)
		stop, err := c.FollowDead(ctxT(t), after, func(d plane.Dead) error {
			select {
			case got <- d:
			default:
				if record == nil {
					t.Errorf("more than %d dead letters unread", cap(got))
				}
			}
			return record
		})
		if err != nil {
			t.Fatalf("expected the dead letters followed, got %v", err)
		}
		var once sync.Once
		stopOnce := func() { once.Do(stop) }
		t.Cleanup(stopOnce)
		return got, stopOnce
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
	got, stop := follow(0, nil)
	consumer, subject, n := dl.Poison("poison-1")
	first := await(got, "poison-1")
	if first.Consumer != consumer || first.Subject != subject || first.Deliveries != n || first.At.IsZero() {
		t.Fatalf("expected consumer %s given up on %s after %d deliveries, at a time, got %+v", consumer, subject, n, first)
	}
	dl.Poison("poison-2")
	second := await(got, "poison-2")
	switch {
	case first.Position == 0:
		if second.Position != 0 || first.EventPos != 0 || second.EventPos != 0 {
			t.Fatalf("expected a bus keeping no positions to give none, got %+v and %+v", first, second)
		}
	case second.Position <= first.Position:
		t.Fatalf("expected the second dead letter after the first's position %d, got %d", first.Position, second.Position)
	default:
		again, stopAgain := follow(first.Position, nil)
		if d := await(again, "poison-2"); d.Position != second.Position {
			t.Fatalf("expected following after %d to start at %d, got %d", first.Position, second.Position, d.Position)
		}
		stopAgain()
	}
	stop()

	// A letter not recorded is handed again, to the next follower; the
	// ones recorded before it are not.
	refused, stopRefusing := follow(second.Position, errNotRecorded)
	dl.Poison("poison-3")
	await(refused, "poison-3")
	stopRefusing()
	next, _ := follow(second.Position, nil)
	await(next, "poison-3")
}
