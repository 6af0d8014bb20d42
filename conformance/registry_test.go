package conformance

import (
	"errors"
	"slices"
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
	if !ok || !impl.ClaimsCapability(Events) || impl.Driver == "" {
		t.Fatalf("expected a Go implementation claiming events, got %+v", r.Implementations)
	}
	js, ok := r.ForLanguage("javascript")
	if !ok || js.Node != "mesh/sdk-js/driver/main.js" || !slices.Equal(js.Claims, []Capability{Connection, Events}) {
		t.Fatalf("expected the JavaScript implementation claiming the floor and events, its driver for Node.js, got %+v", r.Implementations)
	}
}

func TestRegistryRefusals(t *testing.T) {
	const goDriver = "driver: example.com/d"
	cases := map[string]string{
		"implementations:\n  - {name: go, language: go, " + goDriver + ", claims: [connection, telepathy]}\n":                                                             "unknown capability",
		"implementations:\n  - {name: go, language: go, " + goDriver + ", claims: [events]}\n":                                                                            "claims the floor",
		"implementations:\n  - {name: go, language: go, " + goDriver + ", claims: [connection]}\n  - {name: go, language: js, " + goDriver + ", claims: [connection]}\n":  "duplicated name",
		"implementations:\n  - {name: go, language: go, " + goDriver + ", claims: [connection]}\n  - {name: go2, language: go, " + goDriver + ", claims: [connection]}\n": "two implementations",
		"implementations:\n  - {name: go, " + goDriver + ", claims: [connection]}\n":                                                                                      "language are required",
		"implementations:\n  - {name: go, language: go, " + goDriver + ", claims: [connection], extra: 1}\n":                                                              "field extra not found",
		// The driver's recipe: one of a Go package and a Node.js program.
		"implementations:\n  - {name: js, language: javascript, claims: [connection]}\n":                                              "no build recipe for its driver",
		"implementations:\n  - {name: js, language: javascript, sdk: s, node: s/d/main.js, " + goDriver + ", claims: [connection]}\n": "are both set",
		"implementations:\n  - {name: js, language: javascript, node: s/d/main.js, claims: [connection]}\n":                           "the SDK's directory must be given",
		"implementations:\n  - {name: js, language: javascript, sdk: /s, node: /s/d/main.js, claims: [connection]}\n":                 "the SDK's directory must be given",
		"implementations:\n  - {name: js, language: javascript, sdk: s, node: elsewhere/d/main.js, claims: [connection]}\n":           "a directory inside the SDK's (s)",
		"implementations:\n  - {name: js, language: javascript, sdk: s, node: s/main.js, claims: [connection]}\n":                     "a directory inside the SDK's (s)",
		"implementations:\n  - {name: js, language: javascript, sdk: s, node: s/d/../../main.js, claims: [connection]}\n":             "a directory inside the SDK's (s)",
		"implementations:\n  - {name: js, language: javascript, sdk: s, node: s/d/main.ts, claims: [connection]}\n":                   "must be a .js file",
	}
	for in, want := range cases {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): expected ErrRegistry containing %q, got %v", in, want, err)
		}
	}
}

func TestADriverIsBuiltFromAGoPackageOrANodeProgram(t *testing.T) {
	r, err := Parse([]byte(partial))
	if err != nil {
		t.Fatal(err)
	}
	goImpl, _ := r.Implementation("go")
	js, _ := r.Implementation("js")
	if goImpl.Driver != "example.com/driver" || goImpl.Node != "" || js.Node != "sdk-js/driver/main.js" || js.Driver != "" {
		t.Fatalf("expected one recipe each, got %+v and %+v", goImpl, js)
	}
}

// A registry with a partial SDK, as the JavaScript one is: the floor and
// events.
const partial = `
implementations:
  - {name: go, language: go, driver: example.com/driver, claims: [connection, events, tools, provisioning]}
  - {name: js, language: javascript, sdk: sdk-js, node: sdk-js/driver/main.js, claims: [connection, events]}
`

func TestCheckModuleRefusesWhatTheSDKLacks(t *testing.T) {
	r, err := Parse([]byte(partial))
	if err != nil {
		t.Fatal(err)
	}
	m, err := meshdesc.Parse([]byte(`
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [sensor, panel, caller, notes, store]}]
modules:
  - {name: sensor, language: javascript, emits: [reading], consumes: [notes.written]}
  - {name: panel, language: javascript, consumes: [sensor.reading], tools: [show]}
  - {name: caller, language: javascript, uses: [notes.read]}
  - {name: notes, emits: [written], tools: [read]}
  - {name: store, language: cobol, emits: [saved]}
`))
	if err != nil {
		t.Fatal(err)
	}
	sensor, _ := m.Module("sensor")
	if err := r.CheckModule(sensor); err != nil {
		t.Errorf("a javascript module emitting and consuming: expected accepted, got %v", err)
	}
	notes, _ := m.Module("notes")
	if err := r.CheckModule(notes); err != nil {
		t.Errorf("a go module (the default language) using tools: expected accepted, got %v", err)
	}
	panel, _ := m.Module("panel")
	err = r.CheckModule(panel)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `module "panel" in javascript`) || !strings.Contains(err.Error(), "the manifest needs tools (tools: 1)") {
		t.Errorf("a javascript module serving a tool: expected a refusal naming the module, its language, tools and why, got %v", err)
	}
	caller, _ := m.Module("caller")
	err = r.CheckModule(caller)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `module "caller" in javascript`) || !strings.Contains(err.Error(), "the manifest needs tools (uses: 1)") {
		t.Errorf("a javascript module using a tool: expected a refusal naming the module, its language, tools and why, got %v", err)
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
