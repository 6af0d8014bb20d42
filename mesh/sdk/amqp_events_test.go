package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// quorumDeliveryCount is the header a quorum queue adds to what it
// delivers: not the emitter's, and accepted as any unknown x- header is.
const quorumDeliveryCount = "x-delivery-count"

// The envelope is the envelope: what the SDK emits on AMQP is compared
// header by header and byte for byte with what the logger's queue holds.
func amqpEmittedEventHeaderByHeader(t *testing.T, am *amqpMesh) {
	sensor := am.connect(t, sensorUser)
	at := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"level":3,"where":"hall"}`)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", body,
		sdk.WithEventID("5b8e3f5e-2f9c-4c3a-9d0e-0a1b2c3d4e5f"), sdk.WithTime(at),
		sdk.WithCausation("c0ffee00-0000-4000-8000-000000000001"), sdk.WithSchema("1"))
	if err != nil {
		t.Fatal(err)
	}
	d := am.take(t, loggerQueue)
	want := amqp.Table{
		"x-event-id":     id,
		"x-source":       "sensor",
		"x-node":         "node-a",
		"x-time":         "2026-09-16T10:00:00.000Z",
		"content-type":   "application/json",
		"x-causation-id": "c0ffee00-0000-4000-8000-000000000001",
		"x-schema":       "1",
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if d.Headers[name] != want[name] {
			t.Errorf("header %s: expected %q, got %v", name, want[name], d.Headers[name])
		}
	}
	for name := range d.Headers {
		// The quorum queue counts deliveries in a header of its own.
		if _, ok := want[name]; !ok && name != quorumDeliveryCount {
			t.Errorf("unexpected header %s: %v", name, d.Headers[name])
		}
	}
	if d.Exchange != wire.ExchangeEvents || d.RoutingKey != "sensor.alarm.raised" {
		t.Errorf("expected mesh.events with routing key sensor.alarm.raised, got %s %s", d.Exchange, d.RoutingKey)
	}
	if d.MessageId != id || d.ContentType != wire.ContentTypeJSON || d.DeliveryMode != amqp.Persistent {
		t.Errorf("expected message-id %s, content-type %s, persistent; got %q, %q, %d", id, wire.ContentTypeJSON, d.MessageId, d.ContentType, d.DeliveryMode)
	}
	if string(d.Body) != string(body) {
		t.Errorf("expected the body alone, %s, got %s", body, d.Body)
	}

	// A bare event carries the five required headers only.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`21.5`)); err != nil {
		t.Fatal(err)
	}
	bare := am.take(t, loggerQueue).Headers
	delete(bare, quorumDeliveryCount)
	if len(bare) != len(wire.RequiredHeaders) || bare[wire.HeaderCausationID] != nil || bare[wire.HeaderSchema] != nil {
		t.Errorf("expected the five required headers only, got %v", bare)
	}
}

// What the SDK emits, the SDK consumes, field for field; only the
// handler whose pattern matches runs, and what no handler wanted is
// acked, not given back.
func amqpSubscribeMatchesLocallyAndAcksTheRest(t *testing.T, am *amqpMesh) {
	sensor := am.connect(t, sensorUser)
	logger := am.connect(t, loggerUser)
	var readings, alarms recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 16, 10, 0, 0, 123e6, time.UTC)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"celsius":21.5}`), sdk.WithTime(at), sdk.WithSchema("2"))
	if err != nil {
		t.Fatal(err)
	}
	// Bound to the queue (sensor.alarm.>) but wanted by no handler.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	am.settled(t, loggerUser, loggerQueue)
	got := readings.got()
	if len(got) != 1 {
		t.Fatalf("expected one reading handled, got %d", len(got))
	}
	want := sdk.Event{ID: id, Source: "sensor", Node: "node-a", Key: "sensor.reading", Schema: "2", Time: at, Body: []byte(`{"celsius":21.5}`)}
	if e := got[0]; e.ID != want.ID || e.Source != want.Source || e.Node != want.Node || e.Key != want.Key ||
		e.Schema != want.Schema || e.CausationID != "" || !e.Time.Equal(want.Time) || string(e.Body) != string(want.Body) {
		t.Fatalf("expected %+v, got %+v", want, e)
	}

	if err := logger.Subscribe("sensor.alarm.>", alarms.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", []byte(`{"level":1}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { return len(alarms.got()) == 1, "no alarm handled" })
	am.settled(t, loggerUser, loggerQueue)
	if a := alarms.got(); len(a) != 1 || a[0].Key != "sensor.alarm.raised" || len(readings.got()) != 1 {
		t.Fatalf("expected one alarm handled and still one reading, got %v and %d", a, len(readings.got()))
	}
	if n := am.ready(t, wire.QueueDead); n != 0 {
		t.Fatalf("expected no dead letter, got %d", n)
	}
}

// Delivery is at-least-once: the same event delivered twice is handled
// once. RabbitMQ keeps both copies (it has no window of message ids), so
// the SDK's memory of x-event-id alone stops the second; an event sent
// after both shows the second was delivered before it.
func amqpDeliveredTwiceHandledOnce(t *testing.T, am *amqpMesh) {
	sensor := am.connect(t, sensorUser)
	logger := am.connect(t, loggerUser)
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
	after, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`2`))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { return len(readings.got()) == 2, "the event after the copies not handled" })
	am.settled(t, loggerUser, loggerQueue)
	got := readings.got()
	if len(got) != 2 || got[0].ID != id || got[1].ID != after {
		t.Fatalf("expected the event handled once, then the next one, got %v", got)
	}
}

// A delivery missing a required header is refused — rejected, so the
// queue dead-letters it with the reason "rejected" — and never handled;
// an unknown x- header is accepted, and so is content-type carried only
// as AMQP's property.
func amqpEnvelopeRefusalsAndUnknownHeaders(t *testing.T, am *amqpMesh) {
	logger := am.connect(t, loggerUser)
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	send := func(id string, edit func(amqp.Table) string) {
		t.Helper()
		h := amqp.Table{
			wire.HeaderEventID: id, wire.HeaderSource: "sensor", wire.HeaderNode: "node-a",
			wire.HeaderTime: "2026-09-16T10:00:00.000Z", wire.HeaderContentType: wire.ContentTypeJSON,
		}
		contentType := edit(h)
		am.rawPublish(t, sensorUser, "sensor.reading", h, contentType, []byte(`{}`))
	}
	send("no-time", func(h amqp.Table) string { delete(h, wire.HeaderTime); return "" })
	send("no-source", func(h amqp.Table) string { delete(h, wire.HeaderSource); return "" })
	send("unknown-header", func(h amqp.Table) string { h["x-trace"] = "4bf92f3577b34da6"; return "" })
	send("property-content-type", func(h amqp.Table) string {
		delete(h, wire.HeaderContentType)
		return wire.ContentTypeJSON
	})
	dead := am.dead(t, 2)
	am.settled(t, loggerUser, loggerQueue)
	var refused []string
	for _, d := range dead {
		reason, queue := death(t, d)
		if reason != "rejected" || queue != loggerQueue {
			t.Errorf("expected a dead letter rejected from %s, got %s from %s", loggerQueue, reason, queue)
		}
		refused = append(refused, fmt.Sprint(d.Headers[wire.HeaderEventID]))
	}
	if slices.Sort(refused); !slices.Equal(refused, []string{"no-source", "no-time"}) {
		t.Errorf("expected the two envelopes missing a header dead-lettered, got %v", refused)
	}
	var handled []string
	for _, e := range readings.got() {
		handled = append(handled, e.ID)
	}
	if !slices.Equal(handled, []string{"unknown-header", "property-content-type"}) {
		t.Fatalf("expected the envelopes with an unknown header and with the property handled, got %v", handled)
	}
}

// A failing handler naks; the quorum queue counts the deliveries and,
// after the limit, dead-letters the message to mesh.dead with the reason
// delivery_limit. A panicking handler is the same, and never crashes the
// module.
func amqpFailingHandlerDeadLetters(t *testing.T, am *amqpMesh) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			am.br.Reset(ctxFor(t, time.Minute), t)
			sensor := am.connect(t, sensorUser)
			logger := am.connect(t, loggerUser)
			var mu sync.Mutex
			attempts := 0
			if err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
				mu.Lock()
				attempts++
				mu.Unlock()
				if how == "panic" {
					panic("store away")
				}
				return errors.New("store away")
			}); err != nil {
				t.Fatal(err)
			}
			id, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`))
			if err != nil {
				t.Fatal(err)
			}
			d := am.dead(t, 1)[0]
			reason, queue := death(t, d)
			if reason != "delivery_limit" || queue != loggerQueue || d.Headers[wire.HeaderEventID] != id || string(d.Body) != "1" {
				t.Fatalf("expected event %s dead-lettered from %s at its delivery limit, got %s from %s: %v %s", id, loggerQueue, reason, queue, d.Headers, d.Body)
			}
			am.settled(t, loggerUser, loggerQueue)
			mu.Lock()
			defer mu.Unlock()
			if attempts != amqpMaxDeliver {
				t.Fatalf("expected the handler tried the delivery limit (%d) times, got %d", amqpMaxDeliver, attempts)
			}
		})
	}
}

// A module publishing an event its manifest does not emit is refused by
// the broker, hears so at once, and can still publish what it emits.
func amqpPublishOutsideEmitsIsDenied(t *testing.T, am *amqpMesh) {
	sensor := am.connect(t, sensorUser)
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

// A module whose events queue the mesh has not declared is told so, by
// name, and nothing is declared on its behalf.
func amqpSubscribeWithoutQueue(t *testing.T, am *amqpMesh) {
	if _, err := am.channel(t).QueueDelete(loggerQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	logger := am.connect(t, loggerUser)
	err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error { return nil })
	if !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), loggerQueue) {
		t.Fatalf("expected ErrNoConsumer naming %s, got %v", loggerQueue, err)
	}
	if slices.Contains(am.br.Queues(ctxFor(t, 10*time.Second), t), loggerQueue) {
		t.Fatal("expected the SDK to declare no queue")
	}
	// A module whose manifest consumes nothing has no queue either.
	sensor := am.connect(t, sensorUser)
	start := time.Now()
	err = sensor.Subscribe("logger.anything", func(context.Context, sdk.Event) error { return nil })
	if q := wire.EventsQueue("node-a", "sensor"); !errors.Is(err, sdk.ErrNoConsumer) || !strings.Contains(err.Error(), q) {
		t.Fatalf("expected ErrNoConsumer naming %s, got %v", q, err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the refusal at once, took %s", d)
	}
}

// Close lets a running handler finish and settle its delivery.
func amqpCloseSettlesTheRunningHandler(t *testing.T, am *amqpMesh) {
	sensor := am.connect(t, sensorUser)
	logger, err := sdk.Connect(ctxFor(t, 5*time.Second), writeCred(t, am.br.Creds[loggerUser]), sdk.WithLogger(testLogger(t)))
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
	// Acked before the connection closed: not given back to the queue.
	if q := am.br.Inspect(t, am.admin, loggerQueue); q.Messages != 0 || q.Consumers != 0 {
		t.Fatalf("expected the delivery acked and the consumer gone, got %+v", q)
	}
	if _, err := logger.Publish(ctxFor(t, time.Second), "x", []byte(`1`)); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("expected ErrClosed after Close, got %v", err)
	}
}
