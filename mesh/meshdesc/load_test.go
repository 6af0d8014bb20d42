package meshdesc

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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
	if !m.HasCatalogue() {
		t.Fatal("the sample's catalogue is not found")
	}
}

func TestASeatResolvesToItsHolder(t *testing.T) {
	m, err := Parse([]byte(base + `
  - name: pg
    seat: mesh-store
    tools: [query]
  - name: app
    uses: [mesh-store.query]
`))
	if err != nil {
		t.Fatal(err)
	}
	if refs := m.ResolveTools([]string{"mesh-store.query"}); len(refs) != 1 || refs[0].Module != "pg" {
		t.Fatalf("seat not resolved to its holder: %+v", refs)
	}
}

func TestTheCatalogueIsNamedAfterItsSeatAndListsTheManifestsTools(t *testing.T) {
	_, err := Parse([]byte(base + `
  - name: catalog
    seat: mesh-catalog
    tools: [catalog_tools]
`))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `name it "mesh-catalog"`) {
		t.Fatalf("a catalogue not named after its seat: expected a refusal saying so, got %v", err)
	}
	m, err := Parse([]byte(base + `
  - name: mesh-catalog
    seat: mesh-catalog
    tools: [catalog_tools]
  - name: sensor
    tools: [calibrate, reset]
    tool_docs:
      calibrate:
        description: Sets the offset.
        args: {type: object, properties: {to: {type: number}}, required: [to]}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Catalogue()
	var names []string
	for _, t := range c.Tools {
		names = append(names, t.Name())
	}
	if strings.Join(names, " ") != "em.t mesh-catalog.catalog_tools sensor.calibrate sensor.reset" {
		t.Fatalf("catalogue lists %v", names)
	}
	if c.Tools[2].Description != "Sets the offset." || string(c.Tools[2].Args) != `{"properties":{"to":{"type":"number"}},"required":["to"],"type":"object"}` {
		t.Errorf("calibrate listed as %+v (%s)", c.Tools[2], c.Tools[2].Args)
	}
	if string(c.Tools[3].Args) != `{"type":"object"}` {
		t.Errorf("a tool without docs takes any object, got %s", c.Tools[3].Args)
	}
}

func TestBadToolDocsAreRefusedNamingTheTool(t *testing.T) {
	for doc, want := range map[string]string{
		"tool_docs: {nope: {description: x}}":                                                      `does not serve tool "nope"`,
		"tool_docs: {calibrate: {args: {type: array}}}":                                            "an object",
		"tool_docs: {calibrate: {description: " + strings.Repeat("x", MaxToolDescription+1) + "}}": "more than",
	} {
		_, err := Parse([]byte(base + `
  - name: sensor
    tools: [calibrate]
    ` + doc + "\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tool_docs") {
			t.Errorf("%s: expected a refusal naming tool_docs and saying %q, got %v", doc, want, err)
		}
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
		{"a name the host runs programs by", strings.Replace(strings.Replace(base, "name: co,", "name: default,", 1), "em, co]", "em, default]", 1), `the name is reserved`},
		{"unknown field", base + "extra: 1\n", `field extra not found`},
		{"monitor on every IPv4 interface", strings.Replace(base, "monitor: nats", "monitor: 0.0.0.0", 1), `bus.monitor "0.0.0.0": an unspecified address binds every interface`},
		{"monitor on every IPv6 interface", strings.Replace(base, "monitor: nats", "monitor: '::'", 1), `bus.monitor "::": an unspecified address`},
		{"monitor on every interface, mapped", strings.Replace(base, "monitor: nats", "monitor: '::ffff:0.0.0.0'", 1), `an unspecified address`},
		{"monitor missing", strings.Replace(base, ", monitor: nats", "", 1), `bus.monitor "": the private host the monitoring endpoint binds is required`},
		{"monitor with a port", strings.Replace(base, "monitor: nats", "monitor: 'nats:8222'", 1), `bus.monitor "nats:8222": holds a port ("8222"): give the host alone and the port as bus.monitor_port`},
		{"monitor IPv6 with a port", strings.Replace(base, "monitor: nats", "monitor: '[::1]:8222'", 1), `bus.monitor "[::1]:8222": holds a port`},
		{"monitor IPv6 in brackets", strings.Replace(base, "monitor: nats", "monitor: '[::1]'", 1), `bus.monitor "[::1]": write an IPv6 address without brackets`},
		{"monitor numeric name", strings.Replace(base, "monitor: nats", "monitor: '0'", 1), `bus.monitor "0": a host name whose last label is all digits`},
		{"monitor not a host", strings.Replace(base, "monitor: nats", "monitor: 'my host'", 1), `bus.monitor "my host": not a DNS name or an IP address`},
		{"a second document", base + "---\nname: other\n", `a second YAML document begins at line 9: a mesh description is one document`},
		{"a second, broken document", base + "---\nname: [\n", `after the first document`},
		{"empty", "", `empty (no YAML document)`},
		{"a version that is not one", strings.Replace(base, "name: em,", "name: em, version: '1 2',", 1), `modules[0] "em".version: "1 2" is not a version`},
		{"a version beginning with a dot", strings.Replace(base, "name: em,", "name: em, version: .1,", 1), `is not a version`},
		{"amqp without names", base + "amqp: {management: rabbitmq}\n", `amqp.names: at least one name the broker is dialled by is required`},
		{"amqp name not a host", base + "amqp: {names: ['rabbit mq'], management: rabbitmq}\n", `amqp.names[0] "rabbit mq": not a DNS name or an IP address`},
		{"amqp management missing", base + "amqp: {names: [rabbitmq]}\n", `amqp.management "": the endpoint's private host is required`},
		{"amqp management with a port", base + "amqp: {names: [rabbitmq], management: 'rabbitmq:15672'}\n", `amqp.management "rabbitmq:15672": holds a port ("15672"): give the host alone and the port as amqp.management_port`},
		{"amqp management on every interface", base + "amqp: {names: [rabbitmq], management: 0.0.0.0}\n", `amqp.management "0.0.0.0": an unspecified address`},
		{"amqp ports equal", base + "amqp: {names: [rabbitmq], management: rabbitmq, port: 15672}\n", `amqp.management_port: equals amqp.port 15672`},
		{"amqp port out of range", base + "amqp: {names: [rabbitmq], management: rabbitmq, port: 70000}\n", `amqp.port: port 70000 out of range`},
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
	m, err := Parse([]byte(strings.Replace(base, "name: em,", "name: em, version: 1.4.0-rc1+b2,", 1)))
	if err != nil || m.Modules[0].Version != "1.4.0-rc1+b2" {
		t.Fatalf("a module with a version: %v", err)
	}
}

// TestAMQPBroker: a described broker gets its default ports; none
// described is none.
func TestAMQPBroker(t *testing.T) {
	m, err := Parse([]byte(base))
	if err != nil || m.AMQP != nil {
		t.Fatalf("no amqp section: expected no broker, got %+v, %v", m.AMQP, err)
	}
	m, err = Parse([]byte(base + "amqp: {names: [rabbitmq, 10.0.0.7], management: rabbitmq}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := AMQP{Names: []string{"rabbitmq", "10.0.0.7"}, Port: 5671, Management: "rabbitmq", ManagementPort: DefaultManagementPort}
	if !reflect.DeepEqual(*m.AMQP, want) {
		t.Fatalf("expected %+v, got %+v", want, *m.AMQP)
	}
}

// TestMonitorHosts: a name or an address of one interface is accepted,
// IPv6 included; the port stays apart.
func TestMonitorHosts(t *testing.T) {
	for _, h := range []string{"nats", "nats.mesh.internal", "10.0.0.5", "127.0.0.1", "::1", "fd00::5"} {
		m, err := Parse([]byte(strings.Replace(base, "monitor: nats", "monitor: '"+h+"'", 1)))
		if err != nil {
			t.Errorf("monitor %q: %v", h, err)
			continue
		}
		if m.Bus.Monitor != h || m.Bus.MonitorPort != DefaultMonitorPort {
			t.Errorf("monitor %q: read as %q port %d", h, m.Bus.Monitor, m.Bus.MonitorPort)
		}
	}
}

// TestOneDocumentWithAnEndMarker: an explicit end of the one document is
// not a second document.
func TestOneDocumentWithAnEndMarker(t *testing.T) {
	if _, err := Parse([]byte("---\n" + base + "...\n")); err != nil {
		t.Fatal(err)
	}
}

// TestToolArgsAreValidJSONSchema: a tool's arguments are checked as a
// JSON Schema when the description is read, the refusal naming the
// module, the tool and what is wrong (issue 18: a YAML comma gave the
// sample's schema a property "in the reading's unit": null, and nothing
// noticed).
func TestToolArgsAreValidJSONSchema(t *testing.T) {
	for args, want := range map[string]string{
		"{type: object, properties: {to: {type: number, description: the offset, in the reading's unit}}}": `"in the reading's unit" is not a JSON Schema keyword (a YAML flow mapping split at an unquoted comma?`,
		"{type: object, properties: {to: {type: numbr}}}":                                                  `"numbr"`,
		"{type: object, properties: {to: {type: [number, text]}}}":                                         `"text"`,
		"{type: object, required: to}":                                                                     "required",
		"{type: object, properties: {'in the unit': }}":                                                    `property "in the unit" has no schema (null)`,
		"{type: object, proprties: {to: {type: number}}}":                                                  `"proprties" is not a JSON Schema keyword`,
		"{type: object, properties: {to: {minimum: low}}}":                                                 "minimum",
		"{type: object, properties: {to: {type: string, pattern: '('}}}":                                   "pattern",
		"{type: object, properties: {to: {$ref: '#/nowhere'}}}":                                            "nowhere",
		"{type: object, properties: {to: {items: {type: 7}}}}":                                             "type",
	} {
		_, err := Parse([]byte(base + `
  - name: sensor
    tools: [calibrate]
    tool_docs: {calibrate: {args: ` + args + "}}\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `modules[2] "sensor".tool_docs["calibrate"]`) || !strings.Contains(err.Error(), "JSON Schema") {
			t.Errorf("args %s: expected a refusal naming the module, the tool and saying %q, got %v", args, want, err)
		}
	}
	// What JSON Schema allows is accepted: a boolean schema, a keyword of
	// its own, a property named type.
	if _, err := Parse([]byte(base + `
  - name: sensor
    tools: [calibrate]
    tool_docs: {calibrate: {args: {type: object, properties: {to: true, type: {type: [string, "null"], enum: [{type: x}]}}, x-ui: {order: 1}}}}
`)); err != nil {
		t.Errorf("a valid schema: %v", err)
	}
}

// TestTheSampleMeshesToolSchemasSayWhatTheyMean: the sample's calibrate
// takes "to", a number described in full, and nothing else.
func TestTheSampleMeshesToolSchemasSayWhatTheyMean(t *testing.T) {
	for _, name := range []string{"mesh.yaml", "mesh-changed.yaml"} {
		m, err := Load(filepath.Join("..", "..", "features", "testdata", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tool := range m.Catalogue().Tools {
			if tool.Name() != "sensor.calibrate" {
				continue
			}
			want := `{"additionalProperties":false,"properties":{"to":{"description":"the offset, in the reading's unit","type":"number"}},"required":["to"],"type":"object"}`
			if string(tool.Args) != want {
				t.Errorf("%s: sensor.calibrate's arguments are %s, want %s", name, tool.Args, want)
			}
		}
	}
}

func TestTheBrokerSeatIsAssignedOncePerMesh(t *testing.T) {
	const desc = `name: m
bus: {names: [nats], monitor: nats}
nodes:
  - name: node-a
    modules: [nats]
  - name: node-b
    modules: [nats]
modules:
  - name: nats
    seat: mesh-broker
`
	_, err := Parse([]byte(desc))
	want := `nodes[1] "node-b".modules[0] "nats": seat mesh-broker is assigned twice: here and at nodes[0] "node-a".modules[0] "nats"`
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("expected a refusal naming both assignments, %q, got %v", want, err)
	}
	if _, err := Parse([]byte(strings.Replace(desc, "  - name: node-b\n    modules: [nats]\n", "  - name: node-b\n", 1))); err != nil {
		t.Fatalf("expected one assignment accepted, got %v", err)
	}
}

func TestTheCompatibilityBrokerKeepsThePredecessorsUsersAlone(t *testing.T) {
	const ok = `name: m
bus: {names: [nats], monitor: nats}
amqp: {names: [rabbitmq], management: rabbitmq}
nodes:
  - name: node-a
modules:
  - name: amqp-compat
    compat:
      users: [legacy-app]
      vhosts: [legacy]
      retire_after: 10m
`
	m, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if c, found := m.CompatBroker(); !found || c.Compat.RetireAfterDuration() != 10*time.Minute {
		t.Fatalf("expected the compatibility broker, retirable after 10m, got %+v", c)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"a mesh user", "users: [legacy-app]", "users: [host.node-a]", `users[0] "host.node-a": named as the mesh names its users`},
		{"the controller", "users: [legacy-app]", "users: [controller]", "a user of the mesh's own"},
		{"no users", "users: [legacy-app]", "users: []", "the predecessor's users are required"},
		{"the mesh's vhost", "vhosts: [legacy]", "vhosts: [mesh]", `vhosts[0] "mesh": the mesh's own virtual host`},
		{"no retirement condition", "retire_after: 10m", "retire_after: soon", `retire_after: "soon" is not a duration`},
		{"no broker", "amqp: {names: [rabbitmq], management: rabbitmq}\n", "", "names no broker"},
		{"placed on a node", "  - name: node-a\n", "  - name: node-a\n    modules: [amqp-compat]\n", `placed on nodes[0] "node-a"`},
		{"an account on the bus", "      retire_after: 10m\n", "      retire_after: 10m\n    emits: [x]\n", "it has no account on the bus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(ok, tc.from, tc.to, 1)))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("expected a refusal saying %q, got %v", tc.want, err)
			}
		})
	}
}
