package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// recorder is an event handler that keeps what it was given.
type recorder struct {
	mu     sync.Mutex
	events []sdk.Event
}

func (r *recorder) handle(_ context.Context, e sdk.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) got() []sdk.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// The envelope is the envelope: what the SDK emits is compared header by
// header and byte for byte with what the bus stored.
func emittedEventHeaderByHeader(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	at := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"level":3,"where":"hall"}`)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", body,
		sdk.WithEventID("5b8e3f5e-2f9c-4c3a-9d0e-0a1b2c3d4e5f"), sdk.WithTime(at),
		sdk.WithCausation("c0ffee00-0000-4000-8000-000000000001"), sdk.WithSchema("1"))
	if err != nil {
		t.Fatal(err)
	}
	msg := b.storedEvent(t, "sensor", "alarm.raised")
	want := map[string][]string{
		"x-event-id":     {id},
		"x-source":       {"sensor"},
		"x-node":         {"node-a"},
		"x-time":         {"2026-09-16T10:00:00.000Z"},
		"content-type":   {"application/json"},
		"x-causation-id": {"c0ffee00-0000-4000-8000-000000000001"},
		"x-schema":       {"1"},
	}
	switch b.busName() {
	case "nats":
		want["Nats-Msg-Id"] = []string{id} // the publish's message id is the event id
	case "amqp":
		// The quorum queue counts deliveries in a header of its own.
		delete(msg.header, quorumDeliveryCount)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got := msg.header[name]; !slices.Equal(got, want[name]) {
			t.Errorf("header %s: expected %q, got %q", name, want[name], got)
		}
	}
	for name := range msg.header {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected header %s: %q", name, msg.header[name])
		}
	}
	if b.busName() == "amqp" {
		// AMQP carries the key, the event id and the content type as
		// properties too, and the message persistent.
		d := msg.delivery
		if d.Exchange != wire.ExchangeEvents || d.RoutingKey != "sensor.alarm.raised" {
			t.Errorf("expected mesh.events with routing key sensor.alarm.raised, got %s %s", d.Exchange, d.RoutingKey)
		}
		if d.MessageId != id || d.ContentType != wire.ContentTypeJSON || d.DeliveryMode != amqp.Persistent {
			t.Errorf("expected message-id %s, content-type %s, persistent; got %q, %q, %d", id, wire.ContentTypeJSON, d.MessageId, d.ContentType, d.DeliveryMode)
		}
	}
	if string(msg.body) != string(body) {
		t.Errorf("expected the body alone, %s, got %s", body, msg.body)
	}

	// A bare event carries neither optional header: the five required
	// headers only, and on NATS Nats-Msg-Id.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`21.5`)); err != nil {
		t.Fatal(err)
	}
	bare := b.storedEvent(t, "sensor", "reading").header
	headers := len(wire.RequiredHeaders)
	switch b.busName() {
	case "nats":
		headers++ // Nats-Msg-Id
	case "amqp":
		delete(bare, quorumDeliveryCount)
	}
	_, causation := bare[wire.HeaderCausationID]
	_, schema := bare[wire.HeaderSchema]
	if causation || schema || len(bare) != headers {
		t.Errorf("expected the five required headers (and Nats-Msg-Id on NATS) only, got %v", bare)
	}
}

// What the SDK emits, the SDK consumes, field for field; only the
// handler whose pattern matches runs, and what no handler wanted is
// acked, not given back.
func subscribeMatchesLocallyAndAcksTheRest(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	logger := b.connect(t, loggerUser)
	var readings, alarms recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 16, 10, 0, 0, 123e6, time.UTC)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"celsius":21.5}`), sdk.WithTime(at), sdk.WithSchema("2"))
	if err != nil {
		t.Fatal(err)
	}
	// Delivered to the logger (its consumer's filters and its queue's
	// bindings include sensor.alarm.>) but wanted by no handler:
	// acknowledged, never redelivered.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	b.settle(t, 2)
	got := readings.got()
	if len(got) != 1 {
		t.Fatalf("expected one reading handled, got %d", len(got))
	}
	want := sdk.Event{ID: id, Source: "sensor", Node: "node-a", Key: "sensor.reading", Schema: "2", Time: at, Body: []byte(`{"celsius":21.5}`)}
	if e := got[0]; e.ID != want.ID || e.Source != want.Source || e.Node != want.Node || e.Key != want.Key ||
		e.Schema != want.Schema || e.CausationID != "" || !e.Time.Equal(want.Time) || string(e.Body) != string(want.Body) {
		t.Fatalf("expected %+v, got %+v", want, e)
	}

	// A second Subscribe on the same consumer: now alarms are wanted.
	if err := logger.Subscribe("sensor.alarm.>", alarms.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", []byte(`{"level":1}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { return len(alarms.got()) == 1, "no alarm handled" })
	b.settle(t, 3)
	if a := alarms.got(); len(a) != 1 || a[0].Key != "sensor.alarm.raised" || len(readings.got()) != 1 {
		t.Fatalf("expected one alarm handled and still one reading, got %v and %d", a, len(readings.got()))
	}
	if am, ok := b.(*amqpMesh); ok {
		// What was acked was not dead-lettered either (on NATS, settle has
		// counted the deliveries and found none redelivered).
		if n := am.ready(t, wire.QueueDead); n != 0 {
			t.Fatalf("expected no dead letter, got %d", n)
		}
	}
}

// Delivery is at-least-once: the same event delivered twice is handled
// once.
func deliveredTwiceHandledOnce(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	logger := b.connect(t, loggerUser)
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	const id = "7d2c5a10-8f6e-4b1d-a9c3-2e4f6a8b0c1d"
	for range 2 {
		if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`), sdk.WithEventID(id)); err != nil {
			t.Fatal(err)
		}
	}
	switch b := b.(type) {
	case *testMesh:
		// The server refuses a repeated Nats-Msg-Id inside its window; a
		// copy under another message id (a retry after the window) reaches
		// the consumer and the SDK's memory of x-event-id stops it.
		_, rawJS := b.raw(t, sensorUser)
		msg := nats.NewMsg(wire.EventSubject("sensor", "reading"))
		msg.Header = maps.Clone(b.stored(t, msg.Subject).Header)
		msg.Header.Set("Nats-Msg-Id", "another-message-id")
		msg.Data = []byte(`1`)
		ack, err := rawJS.PublishMsg(ctxFor(t, 5*time.Second), msg)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != 2 {
			t.Fatalf("expected the server to have kept one copy of the SDK's two and this as the second, got sequence %d", ack.Sequence)
		}
		ci := b.settled(t, 2)
		if ci.Delivered.Consumer != 2 {
			t.Fatalf("expected both copies delivered, got %+v", ci.Delivered)
		}
		if got := readings.got(); len(got) != 1 || got[0].ID != id {
			t.Fatalf("expected the event handled once, got %d", len(got))
		}
	case *amqpMesh:
		// RabbitMQ keeps both copies (it has no window of message ids), so
		// the SDK's memory of x-event-id alone stops the second; an event
		// sent after both shows the second was delivered before it.
		after, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`2`))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() (bool, string) { return len(readings.got()) == 2, "the event after the copies not handled" })
		b.settle(t, 3)
		got := readings.got()
		if len(got) != 2 || got[0].ID != id || got[1].ID != after {
			t.Fatalf("expected the event handled once, then the next one, got %v", got)
		}
	default:
		t.Fatalf("no case for bus %s", b.busName())
	}
}

// The envelope: a delivery missing a required header, one whose x-source
// is not the module its subject names (sensor, published by sensor on its
// own subject, claiming to be catalog on node-b: issue 7), one whose body
// is not JSON, one with an id over its limit, is refused and never
// handled; an unknown x- header is accepted.
func envelopeRefusalsAndUnknownHeaders(t *testing.T, b bus) {
	logger := b.connect(t, loggerUser)
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	send := func(id string, body []byte, edit func(map[string]string) string) {
		t.Helper()
		h := map[string]string{
			wire.HeaderEventID: id, wire.HeaderSource: "sensor", wire.HeaderNode: "node-a",
			wire.HeaderTime: "2026-09-16T10:00:00.000Z", wire.HeaderContentType: wire.ContentTypeJSON,
		}
		contentType := edit(h)
		b.publishRaw(t, sensorUser, "sensor", "reading", h, contentType, body)
	}
	same := func(map[string]string) string { return "" }
	send("no-time", []byte(`{}`), func(h map[string]string) string { delete(h, wire.HeaderTime); return "" })
	send("no-source", []byte(`{}`), func(h map[string]string) string { delete(h, wire.HeaderSource); return "" })
	send("spoofed-source", []byte(`{}`), func(h map[string]string) string {
		h[wire.HeaderSource], h[wire.HeaderNode] = "catalog", "node-b"
		return ""
	})
	send("not-json", []byte(`not json`), same)
	long := "long-" + strings.Repeat("i", wire.MaxIDBytes)
	send(long, []byte(`{}`), same)
	send("unknown-header", []byte(`{}`), func(h map[string]string) string { h["x-trace"] = "4bf92f3577b34da6"; return "" })
	wantHandled := []string{"unknown-header"}
	switch b := b.(type) {
	case *testMesh:
		// Refused is terminated: never handled, never redelivered.
		ci := b.settled(t, 6)
		if ci.NumRedelivered != 0 || ci.Delivered.Consumer != 6 {
			t.Fatalf("expected the refused envelopes terminated, not redelivered: %+v", ci)
		}
	case *amqpMesh:
		// Content-type carried only as AMQP's property is accepted too
		// (NATS has no such property).
		send("property-content-type", []byte(`{}`), func(h map[string]string) string {
			delete(h, wire.HeaderContentType)
			return wire.ContentTypeJSON
		})
		wantHandled = append(wantHandled, "property-content-type")
		// Refused is rejected, so the queue dead-letters it with the
		// reason "rejected".
		dead := b.dead(t, 5)
		b.settled(t, loggerUser, loggerQueue)
		var refused []string
		for _, d := range dead {
			reason, queue := death(t, d)
			if reason != "rejected" || queue != loggerQueue {
				t.Errorf("expected a dead letter rejected from %s, got %s from %s", loggerQueue, reason, queue)
			}
			refused = append(refused, fmt.Sprint(d.Headers[wire.HeaderEventID]))
		}
		if slices.Sort(refused); !slices.Equal(refused, []string{long, "no-source", "no-time", "not-json", "spoofed-source"}) {
			t.Errorf("expected the five refused envelopes dead-lettered, got %v", refused)
		}
	default:
		t.Fatalf("no case for bus %s", b.busName())
	}
	var handled []string
	for _, e := range readings.got() {
		handled = append(handled, e.ID)
	}
	if !slices.Equal(handled, wantHandled) {
		t.Fatalf("expected only the envelopes %v handled, got %v", wantHandled, handled)
	}
}

// A failing handler naks; after the delivery limit the bus dead-letters
// the message. A panicking handler is the same, and never crashes the
// module.
func failingHandlerDeadLetters(t *testing.T, b bus) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			b := b.fresh(t)
			sensor := b.connect(t, sensorUser)
			logger := b.connect(t, loggerUser)
			var mu sync.Mutex
			var attempts []time.Time
			if err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
				mu.Lock()
				attempts = append(attempts, time.Now())
				mu.Unlock()
				if how == "panic" {
					panic("handler bug")
				}
				return errors.New("store away")
			}); err != nil {
				t.Fatal(err)
			}
			id, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`))
			if err != nil {
				t.Fatal(err)
			}
			switch b := b.(type) {
			case *testMesh:
				// After MaxDeliver the server dead-letters the message: DEAD
				// holds the max-deliveries advisory naming it.
				natsDeadAdvisory(t, b)
			case *amqpMesh:
				// The quorum queue counts the deliveries and, after the
				// limit, dead-letters the message itself to mesh.dead with
				// the reason delivery_limit.
				d := b.dead(t, 1)[0]
				reason, queue := death(t, d)
				if reason != "delivery_limit" || queue != loggerQueue || d.Headers[wire.HeaderEventID] != id || string(d.Body) != "1" {
					t.Fatalf("expected event %s dead-lettered from %s at its delivery limit, got %s from %s: %v %s", id, loggerQueue, reason, queue, d.Headers, d.Body)
				}
				b.settled(t, loggerUser, loggerQueue)
			default:
				t.Fatalf("no case for bus %s", b.busName())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) != busMaxDeliver {
				t.Fatalf("expected the handler tried the delivery limit (%d) times, got %d", busMaxDeliver, len(attempts))
			}
			// Asked for again later each time, not at once: the waits
			// double from a second (the SDK's redelivery delay).
			for i := 1; i < len(attempts); i++ {
				want := time.Second << (i - 1)
				if gap := attempts[i].Sub(attempts[i-1]); gap < want {
					t.Errorf("expected delivery %d at least %s after delivery %d, it came after %s", i+1, want, i, gap)
				}
			}
		})
	}
}

// natsDeadAdvisory waits for DEAD to hold the max-deliveries advisory for
// the first event of EVENTS, after busMaxDeliver deliveries to the logger.
func natsDeadAdvisory(t *testing.T, tm *testMesh) {
	t.Helper()
	dead, err := tm.js.Stream(ctxFor(t, 5*time.Second), wire.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		info, err := dead.Info(ctxFor(t, 5*time.Second))
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs == 1, "DEAD holds nothing yet"
	})
	raw, err := dead.GetMsg(ctxFor(t, 5*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	var advisory struct {
		Stream     string `json:"stream"`
		Consumer   string `json:"consumer"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries int    `json:"deliveries"`
	}
	if err := json.Unmarshal(raw.Data, &advisory); err != nil {
		t.Fatal(err)
	}
	if advisory.Stream != wire.StreamEvents || advisory.Consumer != loggerCons || advisory.StreamSeq != 1 || advisory.Deliveries != busMaxDeliver {
		t.Fatalf("expected the advisory for EVENTS/%s seq 1 after %d deliveries, got %+v", loggerCons, busMaxDeliver, advisory)
	}
}

// A module publishing an event its manifest does not emit is refused by
// the bus, hears so at once rather than at its deadline, and can still
// publish what it emits.
func publishOutsideEmitsIsDenied(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	start := time.Now()
	_, err := sensor.Publish(ctxFor(t, 8*time.Second), "alarm.cleared", []byte(`{}`))
	if !errors.Is(err, sdk.ErrDenied) || errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("expected ErrDenied, got %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the denial at once, took %s", d)
	}
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`)); err != nil {
		t.Fatalf("expected the module whole after a refusal, got %v", err)
	}
}

// Close lets a running handler finish and settle its delivery.
func closeSettlesTheRunningHandler(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	logger, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, b.credential(loggerUser)), sdk.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
		close(started)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	<-started
	closed := make(chan error, 1)
	go func() { closed <- logger.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	// Acked before the connection closed: not given back.
	switch b := b.(type) {
	case *testMesh:
		if ci := b.consumer(t); ci.AckFloor.Stream != 1 || ci.NumAckPending != 0 {
			t.Fatalf("expected the delivery acked before the connection closed, got %+v", ci)
		}
	case *amqpMesh:
		if q := b.br.Inspect(t, b.admin, loggerQueue); q.Messages != 0 || q.Consumers != 0 {
			t.Fatalf("expected the delivery acked and the consumer gone, got %+v", q)
		}
	default:
		t.Fatalf("no case for bus %s", b.busName())
	}
	if _, err := logger.Publish(ctxFor(t, time.Second), "x", []byte(`1`)); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("expected ErrClosed after Close, got %v", err)
	}
}
