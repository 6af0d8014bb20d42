package driverproto

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every kind prints and reads back as itself, "kind" first.
func TestLinesRoundTrip(t *testing.T) {
	bodies := []Body{
		Identity{Node: "node-a", Module: "emitter", EnvNode: "node-a", EnvModule: "emitter"},
		Emitted{ID: "evt-1"},
		Ready{},
		Handled{Event: Event{ID: "evt-1", Source: "emitter", Node: "node-a", Key: "emitter.reading", Time: "2026-09-26T10:00:00.000Z", Body: `{"a":"<&>"}`}},
		Served{Tool: "echo", Args: `{}`},
		Result{Body: `{"celsius":21.5}`},
		Grant{Module: "billing", Node: "node-a"},
		Done{OK: true},
		Failed(ClassTool, "calibration failed"),
	}
	seen := map[Kind]bool{}
	for _, b := range bodies {
		text, err := Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(text), `{"kind":"`+string(b.Kind())+`"`) {
			t.Errorf("expected %s's line to begin with its kind, got %s", b.Kind(), text)
		}
		l, err := ParseLine(string(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if !reflect.DeepEqual(l.Body, b) || l.String() != string(text) {
			t.Errorf("expected %#v back from %s, got %#v", b, text, l.Body)
		}
		seen[b.Kind()] = true
	}
	for _, k := range Kinds {
		if !seen[k] || decoders[k] == nil {
			t.Errorf("kind %s: not round-tripped or without a decoder", k)
		}
	}
	if len(decoders) != len(Kinds) {
		t.Errorf("expected a decoder per kind, %d decoders for %d kinds", len(decoders), len(Kinds))
	}
	if got, _ := Marshal(Ready{}); string(got) != `{"kind":"ready"}` {
		t.Errorf("expected a ready line of its kind alone, got %s", got)
	}
}

// What the protocol does not say is refused, naming the line.
func TestParseLineRefusesWhatTheProtocolDoesNotSay(t *testing.T) {
	for _, text := range []string{
		`not json`,
		`[1]`,
		`null`,
		`{"ok":true}`,
		`{"kind":"refused","part":"x-node"}`,
		`{"kind":"emitted","id":"e","event_id":"e"}`,
		`{"kind":"done","ok":false}`,
		`{"kind":"done","ok":false,"class":"broken"}`,
		`{"kind":"done","ok":true,"class":"tool"}`,
		`{"kind":"grant","module":1}`,
	} {
		if _, err := ParseLine(text); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: expected ErrProtocol, got %v", text, err)
		}
	}
}

func TestClosing(t *testing.T) {
	lines, err := ParseOutput("{\"kind\":\"ready\"}\n\n{\"kind\":\"grant\",\"module\":\"m\",\"node\":\"n\"}\n{\"kind\":\"done\",\"ok\":true}\n")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Closing(lines); err != nil || !d.OK {
		t.Fatalf("expected a closing done, got %v, %v", d, err)
	}
	if g := All[Grant](lines); len(g) != 1 || g[0].Module != "m" {
		t.Fatalf("expected one grant, got %v", g)
	}
	if _, ok := First[Result](lines); ok {
		t.Fatal("expected no result line")
	}
	for _, bad := range []string{
		`{"kind":"ready"}`,
		"{\"kind\":\"done\",\"ok\":true}\n{\"kind\":\"ready\"}",
		"{\"kind\":\"done\",\"ok\":true}\n{\"kind\":\"done\",\"ok\":true}",
	} {
		lines, err := ParseOutput(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Closing(lines); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: expected ErrProtocol, got %v", bad, err)
		}
	}
}

// Every command reads back from its own command line as itself.
func TestCommandsRoundTrip(t *testing.T) {
	cmds := []Command{
		Connect{},
		Emit{Fixture: "/fixtures/event.json"},
		Consume{Patterns: []string{"emitter.reading", "emitter.>"}, Count: 1000, Timeout: 90 * time.Second},
		Consume{Patterns: []string{"emitter.reading"}, Count: 1, Timeout: 1500 * time.Millisecond, Fail: true},
		Consume{Patterns: []string{"emitter.reading"}, Count: 2, Timeout: time.Second, FailFor: 2 * time.Second},
		Consume{Patterns: []string{"emitter.reading"}, Count: 5, Timeout: 30 * time.Second, Fail: true, RedeliverAfter: 250 * time.Millisecond},
		Serve{Tool: "echo", Duration: 90 * time.Second},
		Serve{Tool: "echo", Duration: time.Second, Fail: "calibration failed"},
		Serve{Tool: "echo", Duration: time.Second, Panic: true},
		Call{Module: "server", Tool: "echo", Args: `{"celsius":21.5}`, Timeout: 5 * time.Second},
		ReadGrant{File: "/fixtures/grant.json"},
	}
	names := map[string]bool{}
	for _, c := range cmds {
		got, err := ParseCommand(c.Argv())
		if err != nil {
			t.Fatalf("%q: %v", c.Argv(), err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%q: expected %#v, got %#v", c.Argv(), c, got)
		}
		if Synopsis(c.Name()) == "" || !strings.HasPrefix(Synopsis(c.Name()), c.Name()) {
			t.Errorf("%s: no synopsis", c.Name())
		}
		names[c.Name()] = true
	}
	for _, n := range Commands() {
		if !names[n] {
			t.Errorf("command %s: not round-tripped", n)
		}
	}
}

func TestParseCommandRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"connect", "extra"}, {"emit"}, {"emit", "--bogus"},
		{"consume"}, {"consume", "--pattern", "a", "--count", "0"},
		{"consume", "--pattern", "a", "--fail", "--fail-for", "2s"},
		{"consume", "--pattern", "a", "--timeout", "1m30s"},
		{"consume", "--pattern", "a", "--redeliver-after", "-1s"},
		{"serve"}, {"serve", "--tool", "t", "--fail", "m", "--panic"},
		{"call", "--module", "m"}, {"call", "--module", "m", "--tool", "t", "--args", "{"},
		{"grant"},
	} {
		if _, err := ParseCommand(args); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: expected ErrUsage, got %v", args, err)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"connect", "--help"}, {"emit", "-h"}, {"consume", "-help"}} {
		if _, err := ParseCommand(args); !errors.Is(err, ErrHelp) {
			t.Errorf("%q: expected ErrHelp, got %v", args, err)
		}
	}
}

func TestDurations(t *testing.T) {
	for s, want := range map[string]time.Duration{"0s": 0, "90s": 90 * time.Second, "500ms": 500 * time.Millisecond, "2000ms": 2 * time.Second} {
		got, err := ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("%s: expected %s, got %s, %v", s, want, got, err)
		}
	}
	for _, s := range []string{"", "1m", "1.5s", "-1s", "1h", "s", "10 s", "1m30s"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("%q: expected a refusal", s)
		}
	}
	for d, want := range map[time.Duration]string{90 * time.Second: "90s", 1500 * time.Millisecond: "1500ms", 0: "0s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("%s: expected %s, got %s", d, want, got)
		}
	}
}
