package meshdesc

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestSampleLoads(t *testing.T) {
	m, err := Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Placements()); got != 3 {
		t.Fatalf("placements: expected 3, got %d", got)
	}
	if m.Bus.Port != DefaultClientPort || m.Bus.MonitorPort != DefaultMonitorPort {
		t.Fatalf("defaults not applied: %+v", m.Bus)
	}
	refs := m.ResolveTools([]string{"mesh-catalog.catalog_tools"})
	if refs[0].Module != "catalog" {
		t.Fatalf("seat not resolved to its holder: %+v", refs)
	}
}

const base = `
name: m
bus: {names: [nats], monitor: nats}
nodes:
  - {name: a, modules: [em, co]}
modules:
  - {name: em, emits: [x.y], tools: [t]}
  - {name: co, consumes: [em.x.*]}
`

func TestRefusals(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown module on a node", strings.Replace(base, "[em, co]", "[em, co, ghost]", 1), `nodes[0] "a".modules[2] "ghost": unknown module`},
		{"duplicated module", base + "  - {name: em}\n", `modules[2] "em": duplicated name`},
		{"duplicated node", strings.Replace(base, "nodes:\n", "nodes:\n  - {name: a}\n", 1), `nodes[1] "a": duplicated name`},
		{"consumed pattern nobody emits", strings.Replace(base, "em.x.*", "em.z", 1), `modules[1] "co".consumes[0] "em.z": no manifest emits it`},
		{"consumed from unknown module", strings.Replace(base, "em.x.*", "ghost.x", 1), `unknown module "ghost"`},
		{"name not a subject token", strings.Replace(base, "{name: a,", "{name: a.b,", 1), `nodes[0] "a.b"`},
		{"name with wildcard", strings.Replace(base, "name: em,", "name: 'e*',", 1), `modules[0] "e*"`},
		{"name cannot be a consumer name", strings.Replace(base, "name: co,", "name: 'c o',", 1), `modules[1] "c o"`},
		{"reserved module name", strings.Replace(strings.Replace(base, "name: co,", "name: host,", 1), "em, co]", "em, host]", 1), `the name is reserved`},
		{"unknown field", base + "extra: 1\n", `field extra not found`},
		{"tool use of a tool not served", base + "persons:\n  - {name: p, tools: [em.nope]}\n", `persons[0] "p".tools[0] "em.nope": module "em" does not serve tool "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("expected a refusal containing %q, got none", c.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("expected ErrInvalid, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("expected the error to name %q, got:\n%v", c.want, err)
			}
		})
	}
}

func TestBaseIsValid(t *testing.T) {
	if _, err := Parse([]byte(base)); err != nil {
		t.Fatal(err)
	}
}
