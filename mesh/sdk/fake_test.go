package sdk

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// fakeBus records what the SDK asks of a binding, so that the shared,
// transport-neutral logic is tested without a server.
type fakeBus struct {
	mu        sync.Mutex
	published []published
	patterns  []string
	served    map[string]link.ToolFunc
	reply     link.Message
	replyErr  error
}

type published struct {
	key string
	msg link.Message
}

func (f *fakeBus) Publish(_ context.Context, key string, msg link.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, published{key, msg})
	return nil
}

func (f *fakeBus) Consume(_ context.Context, pattern string) error {
	f.patterns = append(f.patterns, pattern)
	return nil
}

func (f *fakeBus) Serve(_ context.Context, tool string, h link.ToolFunc) error {
	if f.served == nil {
		f.served = map[string]link.ToolFunc{}
	}
	f.served[tool] = h
	return nil
}

func (f *fakeBus) Request(context.Context, string, string, []byte) (link.Message, error) {
	return f.reply, f.replyErr
}

func (f *fakeBus) Close() error { return nil }

// fakeDelivery records how the SDK settled it. attempt and limit are what
// Attempt reports (attempt 0 reads as 1).
type fakeDelivery struct {
	key            string
	msg            link.Message
	attempt, limit int

	mu      sync.Mutex
	settled []string
	reason  string
	delays  []time.Duration
}

func (d *fakeDelivery) Key() string              { return d.key }
func (d *fakeDelivery) Message() link.Message    { return d.msg }
func (d *fakeDelivery) Attempt() (int, int)      { return max(d.attempt, 1), d.limit }
func (d *fakeDelivery) Ack() error               { return d.record("ack", "") }
func (d *fakeDelivery) Term(reason string) error { return d.record("term", reason) }

func (d *fakeDelivery) Nak(delay time.Duration) error {
	d.mu.Lock()
	d.delays = append(d.delays, delay)
	d.mu.Unlock()
	return d.record("nak", "")
}

func (d *fakeDelivery) record(how, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.settled = append(d.settled, how)
	d.reason = reason
	return nil
}

func (d *fakeDelivery) expect(t *testing.T, want ...string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Equal(d.settled, want) {
		t.Fatalf("expected settlements %v, got %v", want, d.settled)
	}
}

// fakeModule is logger on node-b over a fake bus; its log is kept.
func fakeModule(t *testing.T, opts ...Option) (*Module, *fakeBus, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	c := config{log: slog.New(slog.NewJSONHandler(&logs, nil)), timeout: DefaultTimeout, redelivery: DefaultRedelivery}
	for _, o := range opts {
		o(&c)
	}
	m := newModule(wire.Credential{Node: "node-b", Module: "logger"}, c)
	f := &fakeBus{}
	m.bus = f
	t.Cleanup(func() { _ = m.Close() })
	return m, f, &logs
}

func envelope(id string) link.Message {
	return link.Message{
		Header: map[string][]string{
			wire.HeaderEventID:     {id},
			wire.HeaderSource:      {"sensor"},
			wire.HeaderNode:        {"node-a"},
			wire.HeaderTime:        {"2026-09-16T10:00:00.000Z"},
			wire.HeaderContentType: {wire.ContentTypeJSON},
		},
		Body: []byte(`{"celsius":21.5}`),
	}
}
