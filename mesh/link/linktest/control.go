package linktest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// heldComesAgain: a CONTROL message held with a delay comes again no
// sooner than the delay, as a later attempt, and the message behind it is
// delivered meanwhile (design 25 §3: the store away holds what it cannot
// apply, and nothing waits behind it).
func heldComesAgain(t *testing.T, bus Bus) {
	const delay = time.Second
	c := bus.Controller()
	a, _ := bus.Nodes()
	h := bus.Host(a)
	ctx := ctxT(t)
	sendReport(t, h, a, "held", report(a, "held"))
	sendReport(t, h, a, "next", report(a, "next"))
	ch := consume(t, c, 8, func(m plane.ControlMsg, d *delivery) error {
		if m.ID() == "held" && m.Attempt() == 1 {
			d.HeldAt = time.Now()
			return m.Hold(delay)
		}
		return m.Ack(ctx)
	})
	first := next(t, ch, 10*time.Second, "the report to hold")
	if first.ID != "held" || first.Attempt != 1 || first.Subject != wire.NodeReport(a) {
		t.Fatalf("expected report held, attempt 1, on %s, got %s attempt %d on %s", wire.NodeReport(a), first.ID, first.Attempt, first.Subject)
	}
	second := next(t, ch, 10*time.Second, "the report behind the held one")
	if second.ID != "next" {
		t.Fatalf("expected report next before the held one came again, got %s attempt %d", second.ID, second.Attempt)
	}
	if !second.At.Before(first.HeldAt.Add(delay)) {
		t.Fatalf("expected report next within the held one's delay (%v), got it %v after the hold", delay, second.At.Sub(first.HeldAt))
	}
	again := next(t, ch, 10*time.Second+delay, "the held report again")
	if again.ID != "held" || again.Attempt <= first.Attempt {
		t.Fatalf("expected report held again with an attempt above %d, got %s attempt %d", first.Attempt, again.ID, again.Attempt)
	}
	if waited := again.At.Sub(first.HeldAt); waited < delay {
		t.Fatalf("expected the held report no sooner than %v, got it after %v", delay, waited)
	}
	if !bytes.Equal(again.Data, first.Data) {
		t.Fatalf("expected the held report's bytes again, got %q", again.Data)
	}
}

// duplicateRecognisable: the same report sent twice under one id is
// delivered once, or each delivery carries the id, so the controller's
// ledger keeps it once.
func duplicateRecognisable(t *testing.T, bus Bus) {
	c := bus.Controller()
	a, _ := bus.Nodes()
	h := bus.Host(a)
	dup, end := report(a, "dup"), report(a, "end")
	sendReport(t, h, a, "dup", dup)
	sendReport(t, h, a, "dup", dup)
	sendReport(t, h, a, "end", end)
	ch := consume(t, c, 8, ackAll(ctxT(t)))
	n, deadline := 0, time.Now().Add(10*time.Second)
	for {
		d := nextBy(t, ch, deadline, "the reports sent")
		if bytes.Equal(d.Data, end) {
			break
		}
		if !bytes.Equal(d.Data, dup) {
			t.Fatalf("expected report dup or end, got %s: %q", d.ID, d.Data)
		}
		if d.ID != "dup" {
			t.Fatalf("expected every delivery of report dup to carry its id, got %q", d.ID)
		}
		n++
	}
	if n < 1 || n > 2 {
		t.Fatalf("expected report dup delivered once or twice, got %d deliveries", n)
	}
}

// reportsInOrder: one node's reports are delivered in the order the node
// sent them, though several are in flight at once.
func reportsInOrder(t *testing.T, bus Bus) {
	c := bus.Controller()
	a, _ := bus.Nodes()
	h := bus.Host(a)
	var sent []string
	byBody := map[string]string{}
	for i := range 10 {
		id := "order-" + string(rune('a'+i))
		body := report(a, id)
		sendReport(t, h, a, id, body)
		sent, byBody[string(body)] = append(sent, id), id
	}
	ch := consume(t, c, 4, ackAll(ctxT(t)))
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(sent) {
		d := nextBy(t, ch, deadline, "the next report")
		id, ok := byBody[string(d.Data)]
		if !ok {
			t.Fatalf("expected one of the reports sent, got %s: %q", d.ID, d.Data)
		}
		if !slices.Contains(got, id) {
			got = append(got, id)
		}
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("expected the reports in the order sent %v, got %v", sent, got)
	}
}

// reportsAfterOutage: a report the bus could not take while it was away
// is refused then (the host keeps it in its outbox), taken once the bus
// is back, and the controller receives each report, none lost.
func reportsAfterOutage(t *testing.T, bus Bus) {
	out, ok := bus.(Outage)
	if !ok {
		t.Skip("the bus cannot be taken away and back (capability linktest.Outage)")
	}
	c := bus.Controller()
	a, _ := bus.Nodes()
	h := bus.Host(a)
	sendReport(t, h, a, "before", report(a, "before"))
	out.Away()
	during := report(a, "during")
	actx, cancel := timeout(t, 2*time.Second)
	err := h.Report(actx, a, "during", during)
	cancel()
	if err == nil {
		t.Fatal("expected Report to fail while the bus is away, got it taken")
	}
	out.Back()
	var last error
	eventually(t, 30*time.Second, "report during taken once the bus is back", func() (bool, string) {
		rctx, cancel := timeout(t, 2*time.Second)
		defer cancel()
		last = h.Report(rctx, a, "during", during)
		return last == nil, errString(last)
	})
	sendReport(t, h, a, "after", report(a, "after"))
	eventually(t, 30*time.Second, "the controller connected again", func() (bool, string) {
		return c.Connected(), "not connected"
	})
	ch := consume(t, c, 8, ackAll(ctxT(t)))
	want := []string{"before", "during", "after"}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(want) {
		d := nextBy(t, ch, deadline, "each report sent")
		if !slices.Contains(want, d.ID) {
			t.Fatalf("expected reports %v, got %s", want, d.ID)
		}
		if !slices.Contains(got, d.ID) {
			got = append(got, d.ID)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
