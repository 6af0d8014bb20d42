package linktest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// poll is how often a wait looks again.
const poll = 25 * time.Millisecond

// ctxT is a context ending with the test, and within a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// timeout is a context ending after d, within the test's.
func timeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctxT(t), d)
}

// eventually polls cond until it holds, failing the test after within
// with what it waited for and the last state cond described.
func eventually(t *testing.T, within time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected %s within %v, got %s", what, within, state)
		}
		time.Sleep(poll)
	}
}

// delivery is a CONTROL delivery as a body saw it.
type delivery struct {
	Subject, ID string
	Attempt     int
	Data        []byte
	// At is when it was handed over; HeldAt when the body called Hold
	// on it (zero if it did not).
	At, HeldAt time.Time
}

// consume runs the controller's CONTROL consumer until the test ends:
// settle settles each delivery (and may note on d when it held it), and
// the delivery is then sent on the channel returned, in the order
// handed over. A bus not ready to bind it yet is asked again.
func consume(t *testing.T, c plane.Controller, max int, settle func(m plane.ControlMsg, d *delivery) error) <-chan delivery {
	t.Helper()
	out := make(chan delivery, 1024)
	var stop func()
	var last error
	eventually(t, 20*time.Second, "the CONTROL consumer bound", func() (bool, string) {
		var err error
		stop, err = c.Consume(ctxT(t), max, func(m plane.ControlMsg) {
			d := delivery{Subject: m.Subject(), ID: m.ID(), Attempt: m.Attempt(), Data: m.Data(), At: time.Now()}
			if err := settle(m, &d); err != nil {
				t.Errorf("settle %s (attempt %d): %v", d.ID, d.Attempt, err)
			}
			select {
			case out <- d:
			default:
				t.Errorf("more than %d deliveries unread", cap(out))
			}
		})
		last = err
		return err == nil, fmt.Sprint(last)
	})
	t.Cleanup(stop)
	return out
}

// ackAll settles every delivery as done.
func ackAll(ctx context.Context) func(plane.ControlMsg, *delivery) error {
	return func(m plane.ControlMsg, _ *delivery) error { return m.Ack(ctx) }
}

// next is the next delivery within d.
func next(t *testing.T, ch <-chan delivery, within time.Duration, what string) delivery {
	t.Helper()
	return nextBy(t, ch, time.Now().Add(within), what)
}

// nextBy is the next delivery before deadline: a loop reading several
// ends by it even if deliveries keep coming.
func nextBy(t *testing.T, ch <-chan delivery, deadline time.Time, what string) delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(time.Until(deadline)):
		t.Fatalf("expected %s by %s, got none by then", what, deadline.Format(time.TimeOnly))
		return delivery{}
	}
}

// report is a node's report as a host sends it.
func report(node, id string) []byte {
	return wire.Report{Kind: wire.KindReport, Node: node, ID: id, At: time.Now().UTC()}.Marshal()
}

// sendReport sends a report, failing the test if CONTROL does not take
// it.
func sendReport(t *testing.T, h plane.Host, node, id string, body []byte) {
	t.Helper()
	if err := h.Report(ctxT(t), node, id, body); err != nil {
		t.Fatalf("expected report %s taken, got %v", id, err)
	}
}

// alive is a heartbeat's body, naming node.
func alive(node string) []byte {
	b, _ := json.Marshal(struct {
		Node string    `json:"node"`
		At   time.Time `json:"at"`
	}{node, time.Now().UTC()})
	return b
}
