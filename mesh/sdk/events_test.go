package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/controller"
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
// header and byte for byte with what the stream stored.
func TestEmittedEventHeaderByHeader(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	at := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"level":3,"where":"hall"}`)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", body,
		sdk.WithEventID("5b8e3f5e-2f9c-4c3a-9d0e-0a1b2c3d4e5f"), sdk.WithTime(at),
		sdk.WithCausation("c0ffee00-0000-4000-8000-000000000001"), sdk.WithSchema("1"))
	if err != nil {
		t.Fatal(err)
	}
	msg := tm.stored(t, wire.EventSubject("sensor", "alarm.raised"))
	want := nats.Header{
		"x-event-id":     {id},
		"x-source":       {"sensor"},
		"x-node":         {"node-a"},
		"x-time":         {"2026-09-16T10:00:00.000Z"},
		"content-type":   {"application/json"},
		"x-causation-id": {"c0ffee00-0000-4000-8000-000000000001"},
		"x-schema":       {"1"},
		"Nats-Msg-Id":    {id}, // the publish's message id is the event id
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got := msg.Header.Values(name); !slices.Equal(got, want[name]) {
			t.Errorf("header %s: expected %q, got %q", name, want[name], got)
		}
	}
	for name := range msg.Header {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected header %s: %q", name, msg.Header[name])
		}
	}
	if string(msg.Data) != string(body) {
		t.Errorf("expected the body alone, %s, got %s", body, msg.Data)
	}

	// A bare event carries neither optional header.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`21.5`)); err != nil {
		t.Fatal(err)
	}
	bare := tm.stored(t, wire.EventSubject("sensor", "reading")).Header
	if bare.Get(wire.HeaderCausationID) != "" || bare.Get(wire.HeaderSchema) != "" || len(bare) != len(wire.RequiredHeaders)+1 {
		t.Errorf("expected the five required headers and Nats-Msg-Id only, got %v", bare)
	}
}

// What the SDK emits, the SDK consumes, field for field; only the
// handler whose pattern matches runs, and what no handler wanted is acked.
func TestSubscribeMatchesLocallyAndAcksTheRest(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	logger := tm.connect(t, loggerUser)
	var readings, alarms recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 16, 10, 0, 0, 123e6, time.UTC)
	id, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{"celsius":21.5}`), sdk.WithTime(at), sdk.WithSchema("2"))
	if err != nil {
		t.Fatal(err)
	}
	// Delivered by the consumer (its filters include sensor.alarm.>) but
	// wanted by no handler: acknowledged, never redelivered.
	if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "alarm.raised", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	ci := tm.settled(t, 2)
	if ci.NumRedelivered != 0 || ci.Delivered.Consumer != 2 {
		t.Fatalf("expected two deliveries, none redelivered, got %+v", ci)
	}
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
	tm.settled(t, 3)
	if a := alarms.got(); len(a) != 1 || a[0].Key != "sensor.alarm.raised" || len(readings.got()) != 1 {
		t.Fatalf("expected one alarm handled and still one reading, got %v and %d", a, len(readings.got()))
	}
}

// Delivery is at-least-once: the same event delivered twice is handled
// once. The server refuses a repeated Nats-Msg-Id inside its window; a
// copy under another message id (a retry after the window) reaches the
// consumer and the SDK's memory of x-event-id stops it.
func TestDeliveredTwiceHandledOnce(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	logger := tm.connect(t, loggerUser)
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
	_, rawJS := tm.raw(t, sensorUser)
	msg := nats.NewMsg(wire.EventSubject("sensor", "reading"))
	msg.Header = maps.Clone(tm.stored(t, msg.Subject).Header)
	msg.Header.Set("Nats-Msg-Id", "another-message-id")
	msg.Data = []byte(`1`)
	ack, err := rawJS.PublishMsg(ctxFor(t, 5*time.Second), msg)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence != 2 {
		t.Fatalf("expected the server to have kept one copy of the SDK's two and this as the second, got sequence %d", ack.Sequence)
	}
	ci := tm.settled(t, 2)
	if ci.Delivered.Consumer != 2 {
		t.Fatalf("expected both copies delivered, got %+v", ci.Delivered)
	}
	if got := readings.got(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("expected the event handled once, got %d", len(got))
	}
}

// The envelope: a delivery missing a required header is refused
// (terminated: never handled, never redelivered); an unknown x- header is
// accepted.
func TestEnvelopeRefusalsAndUnknownHeaders(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	logger := tm.connect(t, loggerUser)
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	_, rawJS := tm.raw(t, sensorUser)
	send := func(id string, edit func(nats.Header)) {
		t.Helper()
		msg := nats.NewMsg(wire.EventSubject("sensor", "reading"))
		msg.Header = nats.Header{
			wire.HeaderEventID: {id}, wire.HeaderSource: {"sensor"}, wire.HeaderNode: {"node-a"},
			wire.HeaderTime: {"2026-09-16T10:00:00.000Z"}, wire.HeaderContentType: {wire.ContentTypeJSON},
		}
		edit(msg.Header)
		msg.Data = []byte(`{}`)
		if _, err := rawJS.PublishMsg(ctxFor(t, 5*time.Second), msg); err != nil {
			t.Fatal(err)
		}
	}
	send("no-time", func(h nats.Header) { h.Del(wire.HeaderTime) })
	send("no-source", func(h nats.Header) { h.Del(wire.HeaderSource) })
	send("unknown-header", func(h nats.Header) { h.Set("x-trace", "4bf92f3577b34da6") })
	ci := tm.settled(t, 3)
	if ci.NumRedelivered != 0 || ci.Delivered.Consumer != 3 {
		t.Fatalf("expected the refused envelopes terminated, not redelivered: %+v", ci)
	}
	got := readings.got()
	if len(got) != 1 || got[0].ID != "unknown-header" {
		t.Fatalf("expected only the envelope with the unknown header handled, got %v", got)
	}
}

// A failing handler naks; after MaxDeliver the server dead-letters the
// message: DEAD holds the max-deliveries advisory naming it. A panicking
// handler is the same, and never crashes the module.
func TestFailingHandlerDeadLetters(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			p := controller.DefaultPolicy()
			p.EventsMaxDeliver = 3
			tm := startMesh(t, p)
			sensor := tm.connect(t, sensorUser)
			logger := tm.connect(t, loggerUser)
			var mu sync.Mutex
			attempts := 0
			if err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
				mu.Lock()
				attempts++
				mu.Unlock()
				if how == "panic" {
					panic("handler bug")
				}
				return errors.New("store away")
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := sensor.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`1`)); err != nil {
				t.Fatal(err)
			}
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
			if advisory.Stream != wire.StreamEvents || advisory.Consumer != loggerCons || advisory.StreamSeq != 1 || advisory.Deliveries != 3 {
				t.Fatalf("expected the advisory for EVENTS/%s seq 1 after 3 deliveries, got %+v", loggerCons, advisory)
			}
			mu.Lock()
			defer mu.Unlock()
			if attempts != 3 {
				t.Fatalf("expected the handler tried MaxDeliver (3) times, got %d", attempts)
			}
		})
	}
}

// A module publishing an event its manifest does not emit is refused by
// the server, and hears so at once rather than at its deadline.
func TestPublishOutsideEmitsIsDenied(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	start := time.Now()
	_, err := sensor.Publish(ctxFor(t, 8*time.Second), "alarm.cleared", []byte(`{}`))
	if !errors.Is(err, sdk.ErrDenied) || errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("expected ErrDenied, got %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the denial at once, took %s", d)
	}
}

// Close lets a running handler finish and settle its delivery.
func TestCloseSettlesTheRunningHandler(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	logger, err := sdk.Connect(ctxFor(t, 5*time.Second), tm.credFile(t, loggerUser), sdk.WithLogger(testLogger(t)))
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
	if ci := tm.consumer(t); ci.AckFloor.Stream != 1 || ci.NumAckPending != 0 {
		t.Fatalf("expected the delivery acked before the connection closed, got %+v", ci)
	}
	if _, err := logger.Publish(ctxFor(t, time.Second), "x", []byte(`1`)); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("expected ErrClosed after Close, got %v", err)
	}
}
