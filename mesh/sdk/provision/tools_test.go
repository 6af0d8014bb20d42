package provision

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

func TestServeRegistersTheFourTools(t *testing.T) {
	b := newBed(t)
	handlers := map[string]ToolHandler{}
	srv := ServerFunc(func(tool string, h ToolHandler) error {
		handlers[tool] = h
		return nil
	})
	if err := b.loop.Serve(srv); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(wire.ProvisionerTools))
	if !slices.Equal(names, want) {
		t.Fatalf("expected tools %v, got %v", want, names)
	}
	b.ask(billing)
	b.pass()
	out, err := handlers[wire.ToolProvisionerRetirement](context.Background(), []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	st := decode[wire.RetirementStatus](t, out)
	if len(st.Consumers) != 1 || st.Consumers[0].Consumer != "billing" || st.Consumers[0].State != wire.ConsumerActive || !st.Consumers[0].Asked {
		t.Fatalf("expected billing active and asked, got %+v", st)
	}

	failing := ServerFunc(func(tool string, _ ToolHandler) error { return errors.New("no permission") })
	if err := b.loop.Serve(failing); err == nil || !strings.Contains(err.Error(), wire.ToolProvisionerRetirement) {
		t.Fatalf("expected the refusal to name the tool, got %v", err)
	}
}

func TestToolArgumentsAreRefusedByName(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	cases := []struct {
		name string
		call ToolHandler
		args string
		want string
	}{
		{"retirement takes nothing", b.loop.Retirement, `{"set": "x"}`, `unknown field "set"`},
		{"approve without set", b.loop.Approve, `{}`, "field set is missing"},
		{"approve misspelt", b.loop.Approve, `{"sett": "x"}`, `unknown field "sett"`},
		{"reject not json", b.loop.Reject, `set=x`, "invalid"},
		{"reject trailing", b.loop.Reject, `{"set": "x"} {}`, "trailing data"},
		{"delete without node", b.loop.Delete, `{"consumer": "app-1"}`, "field node"},
		{"delete bad consumer", b.loop.Delete, `{"consumer": "App", "node": "n"}`, "field consumer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.call(ctx, []byte(c.args))
			if !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("expected ErrBadArgs containing %q, got %v", c.want, err)
			}
		})
	}
	for _, empty := range []string{"", "null", " {} "} {
		if _, err := b.loop.Retirement(ctx, []byte(empty)); err != nil {
			t.Errorf("expected %q accepted as no arguments, got %v", empty, err)
		}
	}
	if _, err := b.loop.Reject(ctx, []byte(`{"set": "abc"}`)); !errors.Is(err, ErrNoSuchSet) {
		t.Fatalf("expected ErrNoSuchSet with nothing pending, got %v", err)
	}
}

func TestClassify(t *testing.T) {
	base := errors.New("boom")
	cases := []struct {
		err  error
		want string
	}{
		{base, wire.ClassUnknown},
		{WithClass(wire.ClassRefused, base), wire.ClassRefused},
		{errors.Join(errors.New("ensure"), WithClass(wire.ClassSecret, base)), wire.ClassSecret},
		{context.DeadlineExceeded, wire.ClassTimeout},
		{WithClass(wire.ClassInvalid, WithClass(wire.ClassUnreachable, base)), wire.ClassInvalid},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v): expected %s, got %s", c.err, c.want, got)
		}
	}
	if WithClass(wire.ClassRefused, nil) != nil {
		t.Error("expected WithClass of nil to be nil")
	}
	if err := WithClass(wire.ClassRefused, base); !errors.Is(err, base) {
		t.Error("expected WithClass to keep the error in the chain")
	}
}

func TestPublisherFunc(t *testing.T) {
	var got string
	p := PublisherFunc(func(_ context.Context, key string, _ []byte) error { got = key; return nil })
	if err := p.Publish(context.Background(), wire.EventProvisionerFailing, nil); err != nil || got != wire.EventProvisionerFailing {
		t.Fatalf("expected the key passed through, got %q, %v", got, err)
	}
}
