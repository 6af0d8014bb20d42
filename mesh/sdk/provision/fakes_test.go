package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// fakeProvider is a backend in memory: it holds instances, disables and
// marks them, and fails whom it is told to.
type fakeProvider struct {
	mu        sync.Mutex
	insts     map[Consumer]*fakeInst
	fail      map[Consumer]error // Ensure and Check fail with it
	noDisable bool
	heldErr   error
	calls     map[string]int // "ensure", "check", "disable", "mark", "delete"
}

type fakeInst struct {
	disabled bool
	mark     *Mark
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{insts: map[Consumer]*fakeInst{}, fail: map[Consumer]error{}, calls: map[string]int{}}
}

func (p *fakeProvider) Ensure(_ context.Context, g Grant) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["ensure"]++
	if err := p.fail[g.Consumer]; err != nil {
		return err
	}
	in := p.insts[g.Consumer]
	if in == nil {
		in = &fakeInst{}
		p.insts[g.Consumer] = in
	}
	in.disabled, in.mark = false, nil
	return nil
}

func (p *fakeProvider) Check(_ context.Context, g Grant) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["check"]++
	if err := p.fail[g.Consumer]; err != nil {
		return err
	}
	if p.insts[g.Consumer] == nil {
		return errors.New("instance gone")
	}
	return nil
}

func (p *fakeProvider) Held(context.Context) ([]Held, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heldErr != nil {
		return nil, p.heldErr
	}
	var out []Held
	for c, in := range p.insts {
		h := Held{Consumer: c}
		if in.mark != nil {
			mk := *in.mark
			h.Retired = &mk
		}
		out = append(out, h)
	}
	return out, nil
}

func (p *fakeProvider) Disable(_ context.Context, c Consumer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.noDisable {
		return fmt.Errorf("disable %s: %w", c.Module, ErrNoDisable)
	}
	p.calls["disable"]++
	p.insts[c].disabled = true
	return nil
}

func (p *fakeProvider) Mark(_ context.Context, c Consumer, m Mark) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["mark"]++
	p.insts[c].mark = &m
	return nil
}

func (p *fakeProvider) Delete(_ context.Context, c Consumer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["delete"]++
	delete(p.insts, c)
	return nil
}

func (p *fakeProvider) setFail(c Consumer, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.fail, c)
		return
	}
	p.fail[c] = err
}

func (p *fakeProvider) count(call string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[call]
}

func (p *fakeProvider) inst(c Consumer) (fakeInst, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.insts[c]
	if in == nil {
		return fakeInst{}, false
	}
	return *in, true
}

// fakePublisher records what was published, and refuses while told to.
type fakePublisher struct {
	mu     sync.Mutex
	events []published
	refuse bool
}

type published struct {
	key  string
	body []byte
}

func (p *fakePublisher) Publish(_ context.Context, key string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse {
		return errors.New("bus away")
	}
	p.events = append(p.events, published{key, body})
	return nil
}

func (p *fakePublisher) setRefuse(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = v
}

// bodies decodes every published event of key into T.
func bodies[T any](t *testing.T, p *fakePublisher, key string) []T {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []T
	for _, e := range p.events {
		if e.key != key {
			continue
		}
		var v T
		if err := json.Unmarshal(e.body, &v); err != nil {
			t.Fatalf("decode %s %s: %v", key, e.body, err)
		}
		out = append(out, v)
	}
	return out
}

// bed is one provider loop over a contributions file in a temporary
// directory, with a fake backend and a recording bus.
type bed struct {
	t    *testing.T
	path string
	prov *fakeProvider
	pub  *fakePublisher
	loop *Loop
}

func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{t: t, path: filepath.Join(t.TempDir(), "contributions.json"), prov: newFakeProvider(), pub: &fakePublisher{}}
	b.loop = b.newLoop()
	return b
}

// newLoop is a fresh process of the provider over the same backend and
// file: a restart.
func (b *bed) newLoop() *Loop {
	b.t.Helper()
	l, err := New(Config{Path: b.path, Provider: b.prov, Publisher: b.pub, Interval: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(b.t.Output(), nil))})
	if err != nil {
		b.t.Fatal(err)
	}
	return l
}

// ask writes a contributions file asking for cs.
func (b *bed) ask(cs ...Consumer) {
	b.t.Helper()
	entries := make([]wire.Contribution, len(cs))
	for i, c := range cs {
		entries[i] = wire.Contribution{As: c.Module, Node: c.Node, Secret: "s-" + c.Module,
			Values: json.RawMessage(`{"database":"` + c.Module + `"}`)}
	}
	data, err := json.Marshal(entries)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(b.path, data, 0o600); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) pass() {
	b.t.Helper()
	if err := b.loop.Pass(context.Background()); err != nil {
		b.t.Fatalf("pass: %v", err)
	}
}

// passes makes n passes, each after a wait of every (the fake clock of a
// synctest bubble advances at once).
func (b *bed) passes(n int, every time.Duration) {
	b.t.Helper()
	for range n {
		time.Sleep(every)
		b.pass()
	}
}

func (b *bed) status() wire.RetirementStatus {
	b.t.Helper()
	out, err := b.loop.Retirement(context.Background(), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	var st wire.RetirementStatus
	if err := json.Unmarshal(out, &st); err != nil {
		b.t.Fatal(err)
	}
	return st
}

func (b *bed) consumerState(c Consumer) string {
	b.t.Helper()
	for _, cs := range b.status().Consumers {
		if cs.Consumer == c.Module && cs.Node == c.Node {
			return cs.State
		}
	}
	return wire.ConsumerDeleted
}

func (b *bed) retirements(action string) []wire.RetirementEvent {
	var out []wire.RetirementEvent
	for _, e := range bodies[wire.RetirementEvent](b.t, b.pub, wire.EventProvisionerRetirement) {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// consumers makes n consumers on node-a: app-1 … app-n.
func consumers(n int) []Consumer {
	out := make([]Consumer, n)
	for i := range out {
		out[i] = Consumer{Module: fmt.Sprintf("app-%d", i+1), Node: "node-a"}
	}
	return out
}
