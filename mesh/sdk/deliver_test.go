package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
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
		if part, _ := wire.ParseRefusalReason(d.reason); part != name {
			t.Errorf("without %s: expected the refusal's reason to name it as its part, got %q", name, d.reason)
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
		mem.add("sensor", id)
	}
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if mem.has("sensor", id) != want {
			t.Errorf("has(%s): expected %v", id, want)
		}
	}
	if len(mem.events) != 3 {
		t.Fatalf("expected the memory bounded to 3, got %d", len(mem.events))
	}
}

// An event is its emitter's id: the same id from two sources is two
// events, and one module cannot make another's event look handled by
// emitting its id first.
func TestMemoryIsKeyedBySourceAndID(t *testing.T) {
	mem := newMemory(4)
	mem.add("sensor", "id-1")
	if mem.has("catalog", "id-1") {
		t.Fatal("expected catalog's id-1 to be another event than sensor's")
	}
	if !mem.has("sensor", "id-1") {
		t.Fatal("expected sensor's id-1 remembered")
	}
}

func TestDeliverHandlesTheSameIDFromTwoSources(t *testing.T) {
	m, _, _ := fakeModule(t)
	var got []string
	record := func(_ context.Context, e Event) error { got = append(got, e.Source+"/"+e.ID); return nil }
	for _, p := range []string{"sensor.reading", "catalog.reading"} {
		if err := m.Subscribe(p, record); err != nil {
			t.Fatal(err)
		}
	}
	first := &fakeDelivery{key: "sensor.reading", msg: envelope("id-1")}
	other := envelope("id-1")
	other.Header[wire.HeaderSource] = []string{"catalog"}
	second := &fakeDelivery{key: "catalog.reading", msg: other}
	m.deliver(first)
	m.deliver(second)
	first.expect(t, "ack")
	second.expect(t, "ack")
	if strings.Join(got, " ") != "sensor/id-1 catalog/id-1" {
		t.Fatalf("expected both events handled, got %v", got)
	}
}

// Issue 7's reproduction: a module on its own subject claiming to be
// catalog, from node-b, with a body that is not JSON. Each of the three is
// refused on its own, terminated, logged with what was refused and a
// count, and never handled.
func TestDeliverRefusesASpoofedSourceAndABodyThatIsNotJSON(t *testing.T) {
	m, _, logs := fakeModule(t)
	called := 0
	for _, p := range []string{"sensor.reading", "catalog.reading"} {
		if err := m.Subscribe(p, func(context.Context, Event) error { called++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	spoofed := envelope("id-1")
	spoofed.Header[wire.HeaderSource] = []string{"catalog"}
	spoofed.Header[wire.HeaderNode] = []string{"node-b"}
	notJSON := envelope("id-2")
	notJSON.Body = []byte("not json")
	both := envelope("id-3")
	both.Header[wire.HeaderSource] = []string{"catalog"}
	both.Body = []byte("not json")
	cases := []struct {
		msg  link.Message
		part string
	}{{spoofed, wire.HeaderSource}, {notJSON, "body"}, {both, wire.HeaderSource}}
	for i, c := range cases {
		d := &fakeDelivery{key: "sensor.reading", msg: c.msg}
		m.deliver(d)
		d.expect(t, "term")
		line := logLine(t, logs, i)
		if line["msg"] != "envelope refused" || line["part"] != c.part || line["refusals"] != float64(i+1) {
			t.Errorf("case %d: expected a refusal of %s counted %d, got %v", i, c.part, i+1, line)
		}
	}
	if called != 0 {
		t.Fatalf("expected no handler to run, %d did", called)
	}
}

// What a server writes to a reply subject aimed at an event subject is
// never handled: a PubAck's body without headers, a status message.
func TestDeliverRefusesWhatIsNoEnvelope(t *testing.T) {
	m, _, logs := fakeModule(t)
	called := false
	if err := m.Subscribe("sensor.>", func(context.Context, Event) error { called = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, msg := range []link.Message{
		{Body: []byte(`{"stream":"EVENTS","seq":1}`)},
		{Header: map[string][]string{wire.HeaderNATSStatus: {"100"}, "Description": {"Idle Heartbeat"}}},
	} {
		d := &fakeDelivery{key: "sensor.reading", msg: msg}
		m.deliver(d)
		d.expect(t, "term")
		if line := logLine(t, logs, i); line["part"] != "envelope" {
			t.Errorf("message %d: expected the whole envelope refused, got %v", i, line)
		}
	}
	if called {
		t.Fatal("expected no handler to run")
	}
}

// A failing handler's event is asked for again later each time: the
// delay grows with the broker's count of deliveries, and the last
// delivery the broker makes is given back at once.
func TestDeliverNaksWithAGrowingDelay(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 0}
	if got := delaysOfFailing(t); !slices.Equal(got, want) {
		t.Fatalf("expected the delays %v, got %v", want, got)
	}
}

// WithRedelivery's first wait doubles as the default's does.
func TestRedeliveryStartsFromTheFirstWaitGiven(t *testing.T) {
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 0}
	if got := delaysOfFailing(t, WithRedelivery(250*time.Millisecond)); !slices.Equal(got, want) {
		t.Fatalf("expected the delays %v, got %v", want, got)
	}
	var c config
	WithRedelivery(0)(&c)
	WithRedelivery(-time.Second)(&c)
	if c.redelivery != 0 {
		t.Fatalf("expected a wait of zero or less ignored, got %s", c.redelivery)
	}
}

// delaysOfFailing are the delays a module made with opts asks for an
// event back with, its handler failing each of the five deliveries the
// broker makes.
func delaysOfFailing(t *testing.T, opts ...Option) []time.Duration {
	t.Helper()
	m, _, _ := fakeModule(t, opts...)
	if err := m.Subscribe("sensor.reading", func(context.Context, Event) error { return errors.New("store away") }); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		d := &fakeDelivery{key: "sensor.reading", msg: envelope("id-1"), attempt: n, limit: 5}
		m.deliver(d)
		d.expect(t, "nak")
		got = append(got, d.delays...)
	}
	return got
}

func TestRedeliveryDelayIsBounded(t *testing.T) {
	cases := []struct {
		n, limit int
		want     time.Duration
	}{
		{0, 0, time.Second}, {1, 0, time.Second}, {2, 0, 2 * time.Second}, {5, 0, 16 * time.Second},
		{6, 0, maxRedelivery}, {64, 0, maxRedelivery}, {1 << 30, 0, maxRedelivery},
		{3, 3, 0}, {4, 3, 0}, {2, 3, 2 * time.Second},
	}
	for _, c := range cases {
		if got := redeliveryDelay(c.n, c.limit, DefaultRedelivery); got != c.want {
			t.Errorf("redeliveryDelay(%d, %d): expected %s, got %s", c.n, c.limit, c.want, got)
		}
	}
}

// logLine is the i-th JSON line of the module's log.
func logLine(t *testing.T, logs *bytes.Buffer, i int) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if i >= len(lines) {
		t.Fatalf("expected at least %d log lines, got %q", i+1, lines)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
		t.Fatalf("log line %d: %v", i, err)
	}
	return line
}
