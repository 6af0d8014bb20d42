package sdk

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestPublishBuildsTheEnvelope(t *testing.T) {
	m, f, _ := fakeModule(t)
	at := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	id, err := m.Publish(context.Background(), "alarm.raised", []byte(`{"level":3}`),
		WithEventID("fixed-id"), WithTime(at), WithCausation("cause-1"), WithSchema("2"))
	if err != nil || id != "fixed-id" {
		t.Fatalf("expected fixed-id, got %q, %v", id, err)
	}
	p := f.published[0]
	want := map[string]string{
		"x-event-id": "fixed-id", "x-source": "logger", "x-node": "node-b", "x-time": "2026-09-16T10:00:00.000Z",
		"content-type": "application/json", "x-causation-id": "cause-1", "x-schema": "2",
	}
	if p.key != "alarm.raised" || string(p.msg.Body) != `{"level":3}` || len(p.msg.Header) != len(want) {
		t.Fatalf("unexpected publication %+v", p)
	}
	for name, v := range want {
		if got := p.msg.Header[name]; len(got) != 1 || got[0] != v {
			t.Errorf("header %s: expected %q, got %q", name, v, got)
		}
	}

	id, err = m.Publish(context.Background(), "reading", []byte(`1`))
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("expected a random UUID, got %q, %v", id, err)
	}
	bare := f.published[1].msg.Header
	if len(bare) != len(wire.RequiredHeaders) || bare[wire.HeaderEventID][0] != id {
		t.Fatalf("expected exactly the required headers on a bare event, got %v", bare)
	}
	if err := wire.ValidateHeaders(bare); err != nil {
		t.Fatal(err)
	}
}

func TestPublishRefusesWhatCannotBeOnTheWire(t *testing.T) {
	m, f, _ := fakeModule(t)
	for key, body := range map[string]string{"reading": `not json`, "Reading": `{}`, "a..b": `{}`, "": `{}`} {
		if _, err := m.Publish(context.Background(), key, []byte(body)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Publish(%q, %q): expected ErrInvalid, got %v", key, body, err)
		}
	}
	if len(f.published) != 0 {
		t.Fatalf("expected nothing published, got %v", f.published)
	}
}

func TestHandleTurnsFailureAndPanicIntoToolErrors(t *testing.T) {
	m, f, _ := fakeModule(t)
	if err := m.Handle("ok", func(_ context.Context, args []byte) ([]byte, error) { return append(args, '!'), nil }); err != nil {
		t.Fatal(err)
	}
	if err := m.Handle("fails", func(context.Context, []byte) ([]byte, error) { return []byte("ignored"), errors.New("disk\nfull") }); err != nil {
		t.Fatal(err)
	}
	if err := m.Handle("panics", func(context.Context, []byte) ([]byte, error) { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	if err := m.Handle("ok", func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expected a second handler of one tool refused, got %v", err)
	}
	ctx := context.Background()
	if r := f.served["ok"](ctx, link.Message{Body: []byte("x")}); string(r.Body) != "x!" || r.Header != nil {
		t.Fatalf("expected the result alone, got %+v", r)
	}
	for tool, want := range map[string]string{"fails": "disk full", "panics": "handler panicked: boom"} {
		r := f.served[tool](ctx, link.Message{})
		if msg, failed := wire.ToolFailure(r.Header); !failed || msg != want || len(r.Body) != 0 {
			t.Errorf("%s: expected x-error %q and no body, got %+v", tool, want, r)
		}
	}
}

func TestRequestReadsTheReply(t *testing.T) {
	m, f, _ := fakeModule(t)
	f.reply = link.Message{Body: []byte(`{"ok":true}`)}
	out, err := m.Request(context.Background(), "mesh-catalog", "catalog_tools", nil)
	if err != nil || string(out) != `{"ok":true}` {
		t.Fatalf("expected the result, got %q, %v", out, err)
	}
	f.reply = link.Message{Header: wire.ToolErrorHeaders("no such tool")}
	_, err = m.Request(context.Background(), "mesh-catalog", "catalog_tools", nil)
	var te *ToolError
	if !errors.As(err, &te) || te.Module != "mesh-catalog" || te.Tool != "catalog_tools" || te.Message != "no such tool" {
		t.Fatalf("expected a *ToolError, got %v", err)
	}
	f.replyErr = ErrNoResponders
	if _, err := m.Request(context.Background(), "mesh-catalog", "catalog_tools", nil); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("expected ErrNoResponders, got %v", err)
	}
	if _, err := m.Request(context.Background(), "mesh-catalog", "catalog.tools", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expected a dotted tool refused, got %v", err)
	}
}

func TestClosedModuleRefusesCalls(t *testing.T) {
	m, _, _ := fakeModule(t)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Publish(context.Background(), "reading", []byte(`1`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish: expected ErrClosed, got %v", err)
	}
	if err := m.Subscribe("sensor.reading", func(context.Context, Event) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe: expected ErrClosed, got %v", err)
	}
	if err := m.Handle("t", func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Handle: expected ErrClosed, got %v", err)
	}
	if _, err := m.Request(context.Background(), "a", "t", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Request: expected ErrClosed, got %v", err)
	}
}

func TestBindingByScheme(t *testing.T) {
	for _, url := range []string{"tls://u:p@h:1", "nats://u:p@h:1", "amqp://u:p@h:1", "amqps://u:p@h:1"} {
		if _, err := binding(url); err != nil {
			t.Errorf("binding(%s): %v", url, err)
		}
	}
	if _, err := binding("http://h:1"); !errors.Is(err, ErrTransport) {
		t.Errorf("binding(http): expected ErrTransport, got %v", err)
	}
	// A scoped credential over plain amqp has no certificate to pin.
	dial, _ := binding("amqp://u:p@h:1")
	cfg := link.Config{Credential: wire.Credential{URL: "amqp://u:p@h:1"}}
	if _, err := dial(context.Background(), cfg); !errors.Is(err, wire.ErrBadCredential) {
		t.Fatalf("expected plain amqp refused as a bad credential, got %v", err)
	}
}
