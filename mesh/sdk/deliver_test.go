package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestDeliverHandlesMatchingEventOnce(t *testing.T) {
	m, f, _ := fakeModule(t)
	var got []Event
	if err := m.Subscribe("sensor.reading", func(_ context.Context, e Event) error {
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(f.patterns) != 1 || f.patterns[0] != "sensor.reading" {
		t.Fatalf("expected the binding to be told the pattern, got %v", f.patterns)
	}
	first := &fakeDelivery{key: "sensor.reading", msg: envelope("id-1")}
	again := &fakeDelivery{key: "sensor.reading", msg: envelope("id-1")}
	m.deliver(first)
	m.deliver(again)
	first.expect(t, "ack")
	again.expect(t, "ack")
	if len(got) != 1 {
		t.Fatalf("expected a delivery seen twice to be handled once, got %d", len(got))
	}
	e := got[0]
	if e.ID != "id-1" || e.Source != "sensor" || e.Node != "node-a" || e.Key != "sensor.reading" ||
		e.Time.UTC().Format("15:04") != "10:00" || string(e.Body) != `{"celsius":21.5}` || e.CausationID != "" || e.Schema != "" {
		t.Fatalf("unexpected event %+v", e)
	}
}

// What no handler wants is held while the module may still be
// subscribing, then acked; a later Subscribe that wants it gets it.
func TestDeliverAcksWhatNoHandlerWantsAfterTheSettleWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, _ := fakeModule(t)
		var alarms []string
		if err := m.Subscribe("sensor.reading", func(context.Context, Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
		backlog := &fakeDelivery{key: "sensor.alarm.raised", msg: envelope("id-1")}
		unwanted := &fakeDelivery{key: "sensor.alarm.cleared", msg: envelope("id-2")}
		m.deliver(backlog)
		m.deliver(unwanted)
		backlog.expect(t)
		unwanted.expect(t)

		// The module's second Subscribe, a second later, reopens the window.
		time.Sleep(time.Second)
		if err := m.Subscribe("sensor.alarm.raised", func(_ context.Context, e Event) error {
			alarms = append(alarms, e.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settleWindow - time.Millisecond)
		synctest.Wait()
		backlog.expect(t)
		unwanted.expect(t)

		time.Sleep(time.Millisecond)
		synctest.Wait()
		backlog.expect(t, "ack")
		unwanted.expect(t, "ack")
		if len(alarms) != 1 || alarms[0] != "id-1" {
			t.Fatalf("expected the held alarm handled by the later Subscribe, got %v", alarms)
		}

		// Past the window, what no handler wants is acked at once.
		late := &fakeDelivery{key: "sensor.alarm.cleared", msg: envelope("id-3")}
		m.deliver(late)
		late.expect(t, "ack")
	})
}

// A module closing with deliveries held gives them back for its next run.
func TestCloseNaksHeldDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, _ := fakeModule(t)
		if err := m.Subscribe("sensor.reading", func(context.Context, Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
		held := &fakeDelivery{key: "sensor.alarm.raised", msg: envelope("id-1")}
		m.deliver(held)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		held.expect(t, "nak")
	})
}

func TestDeliverRunsEveryMatchingHandler(t *testing.T) {
	m, _, _ := fakeModule(t)
	var ran []string
	for _, p := range []string{"sensor.alarm.>", "sensor.alarm.raised", "sensor.reading"} {
		if err := m.Subscribe(p, func(context.Context, Event) error { ran = append(ran, p); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	d := &fakeDelivery{key: "sensor.alarm.raised", msg: envelope("id-1")}
	m.deliver(d)
	d.expect(t, "ack")
	if strings.Join(ran, " ") != "sensor.alarm.> sensor.alarm.raised" {
		t.Fatalf("expected both alarm handlers, got %v", ran)
	}
}

func TestDeliverNaksFailureAndPanic(t *testing.T) {
	m, _, logs := fakeModule(t)
	attempts := 0
	if err := m.Subscribe("sensor.reading", func(context.Context, Event) error {
		attempts++
		switch attempts {
		case 1:
			return errors.New("store away")
		case 2:
			panic("nil map")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nak", "nak", "ack", "ack"} {
		d := &fakeDelivery{key: "sensor.reading", msg: envelope("id-1")}
		m.deliver(d)
		d.expect(t, want)
	}
	if attempts != 3 {
		t.Fatalf("expected the handler to run until it succeeded and not after, got %d runs", attempts)
	}
	if !strings.Contains(logs.String(), "handler panicked: nil map") {
		t.Fatalf("expected the panic in the log, got %s", logs)
	}
}

func TestDeliverRefusesMissingHeaderNamingIt(t *testing.T) {
	for _, name := range []string{"x-event-id", "x-source", "x-node", "x-time", "content-type"} {
		m, _, logs := fakeModule(t)
		called := false
		if err := m.Subscribe("sensor.>", func(context.Context, Event) error { called = true; return nil }); err != nil {
			t.Fatal(err)
		}
		msg := envelope("id-1")
		delete(msg.Header, name)
		d := &fakeDelivery{key: "sensor.reading", msg: msg}
		m.deliver(d)
		d.expect(t, "term")
		if called {
			t.Errorf("without %s: expected the handler not to run", name)
		}
		if !strings.Contains(d.reason, name) {
			t.Errorf("without %s: expected the refusal to name it, got %q", name, d.reason)
		}
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line["header"] != name {
			t.Errorf("without %s: expected one log line with header=%s, got %s (%v)", name, name, logs, err)
		}
	}
}

func TestDeliverAcceptsUnknownXHeader(t *testing.T) {
	m, _, _ := fakeModule(t)
	handled := 0
	if err := m.Subscribe("sensor.reading", func(context.Context, Event) error { handled++; return nil }); err != nil {
		t.Fatal(err)
	}
	msg := envelope("id-1")
	msg.Header["x-trace"] = []string{"abc"}
	d := &fakeDelivery{key: "sensor.reading", msg: msg}
	m.deliver(d)
	d.expect(t, "ack")
	if handled != 1 {
		t.Fatal("expected an unknown x- header to be accepted")
	}
}

func TestSubscribeRefusesBadPatterns(t *testing.T) {
	m, f, _ := fakeModule(t)
	for _, p := range []string{"reading", "Sensor.reading", "sensor.", "sensor.a.>.b", "sensor.a*"} {
		if err := m.Subscribe(p, func(context.Context, Event) error { return nil }); !errors.Is(err, ErrInvalid) {
			t.Errorf("Subscribe(%q): expected ErrInvalid, got %v", p, err)
		}
	}
	if len(f.patterns) != 0 {
		t.Fatalf("expected nothing bound for refused patterns, got %v", f.patterns)
	}
}

func TestMemoryForgetsTheOldestPastItsSize(t *testing.T) {
	mem := newMemory(3)
	for _, id := range []string{"a", "b", "c", "a", "d"} {
		mem.add(id)
	}
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if mem.has(id) != want {
			t.Errorf("has(%s): expected %v", id, want)
		}
	}
	if len(mem.ids) != 3 {
		t.Fatalf("expected the memory bounded to 3, got %d", len(mem.ids))
	}
}
