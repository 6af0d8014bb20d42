package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

func TestTheShippedRegistryLoads(t *testing.T) {
	r, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	impl, ok := r.ForLanguage("go")
	if !ok || !impl.ClaimsCapability(Events) {
		t.Fatalf("expected a Go implementation claiming events, got %+v", r.Implementations)
	}
}

func TestRegistryRefusals(t *testing.T) {
	cases := map[string]string{
		"implementations:\n  - {name: go, language: go, claims: [connection, telepathy]}\n":                                           "unknown capability",
		"implementations:\n  - {name: go, language: go, claims: [events]}\n":                                                          "claims the floor",
		"implementations:\n  - {name: go, language: go, claims: [connection]}\n  - {name: go, language: js, claims: [connection]}\n":  "duplicated name",
		"implementations:\n  - {name: go, language: go, claims: [connection]}\n  - {name: go2, language: go, claims: [connection]}\n": "two implementations",
		"implementations:\n  - {name: go, claims: [connection]}\n":                                                                    "language are required",
		"implementations:\n  - {name: go, language: go, claims: [connection], extra: 1}\n":                                            "field extra not found",
	}
	for in, want := range cases {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): expected ErrRegistry containing %q, got %v", in, want, err)
		}
	}
}

// A registry with a partial SDK, as the JavaScript one will be: the
// floor and events.
const partial = `
implementations:
  - {name: go, language: go, claims: [connection, events, tools, provisioning]}
  - {name: js, language: js, claims: [connection, events]}
`

func TestCheckModuleRefusesWhatTheSDKLacks(t *testing.T) {
	r, err := Parse([]byte(partial))
	if err != nil {
		t.Fatal(err)
	}
	m, err := meshdesc.Parse([]byte(`
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [sensor, panel, notes, store]}]
modules:
  - {name: sensor, language: js, emits: [reading]}
  - {name: panel, language: js, consumes: [sensor.reading], tools: [show]}
  - {name: notes, emits: [written], tools: [read]}
  - {name: store, language: cobol, emits: [saved]}
`))
	if err != nil {
		t.Fatal(err)
	}
	sensor, _ := m.Module("sensor")
	if err := r.CheckModule(sensor); err != nil {
		t.Errorf("a js module using events only: expected accepted, got %v", err)
	}
	notes, _ := m.Module("notes")
	if err := r.CheckModule(notes); err != nil {
		t.Errorf("a go module (the default language) using tools: expected accepted, got %v", err)
	}
	panel, _ := m.Module("panel")
	err = r.CheckModule(panel)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "tools (tools: 1)") || !strings.Contains(err.Error(), `"panel"`) {
		t.Errorf("a js module serving a tool: expected a refusal naming the module, tools and why, got %v", err)
	}
	store, _ := m.Module("store")
	if err := r.CheckModule(store); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `no SDK for language "cobol"`) {
		t.Errorf("a module in a language without an SDK: expected a refusal, got %v", err)
	}
	if err := r.CheckMesh(m); err == nil || !strings.Contains(err.Error(), "panel") || !strings.Contains(err.Error(), "store") {
		t.Errorf("CheckMesh: expected both refusals, got %v", err)
	}
}

func TestUsesDerivesFromTheManifest(t *testing.T) {
	got := Uses(meshdesc.Module{Name: "p", Provides: []string{"database"}, Uses: []string{"x.y"}})
	want := []Capability{Connection, Tools, Provisioning}
	if len(got) != len(want) {
		t.Fatalf("expected %v, got %v", want, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("expected %v, got %v", want, got)
		}
	}
}
