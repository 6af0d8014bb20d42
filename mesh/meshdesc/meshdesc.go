// Package meshdesc reads and checks the mesh description: the nodes, the
// modules with their manifests, which module runs on which node, the
// persons and the enrolment tokens. It is the one input from which the
// bus's users and permissions are composed (design 25 §4), so everything
// it accepts is checked here, and an entry that is wrong is named.
//
// The format is YAML; docs/mesh-description.md documents it.
package meshdesc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/wire"
)

// Default ports of the bus.
const (
	DefaultClientPort  = 4222
	DefaultMonitorPort = 8222
)

// Mesh is a mesh description.
type Mesh struct {
	// Name names the mesh; it is the NATS server's name.
	Name string `yaml:"name"`
	// Bus says how the bus is reached.
	Bus Bus `yaml:"bus"`
	// AMQP is the RabbitMQ broker of the bus the mesh had before NATS
	// (design 25 §1), when it has one. Which of the two the mesh's own
	// traffic is on is the controller's state, not the description's
	// (genesis chooses, a cutover changes it): the description says what
	// stands, the store where each node is.
	AMQP *AMQP `yaml:"amqp,omitempty"`
	// Nodes are the machines, each with the modules assigned to it.
	Nodes []Node `yaml:"nodes"`
	// Modules are the modules' manifests.
	Modules []Module `yaml:"modules"`
	// Persons are the people with a client on the bus.
	Persons []Person `yaml:"persons,omitempty"`
	// Tokens are the enrolment tokens not yet spent.
	Tokens []Token `yaml:"tokens,omitempty"`
	// Sources are the source repositories that announce revisions to
	// build (design 25 §9 step 4), each a user of the bus.
	Sources []Source `yaml:"sources,omitempty"`
}

// Source is a source repository the builder builds from.
type Source struct {
	Name string `yaml:"name"`
}

// Bus says how the bus is reached.
type Bus struct {
	// Names are every name the bus is dialled by: DNS names or IP
	// addresses. The server's certificate carries all of them; the first
	// is the one written into credentials.
	Names []string `yaml:"names"`
	// Port is the client port (TLS); default 4222.
	Port int `yaml:"port,omitempty"`
	// Monitor is the host the monitoring endpoint binds: a name that
	// resolves, inside the server's container, to its private-network
	// address only, or such an address (IPv4 or IPv6, without brackets).
	// Never an unspecified address (0.0.0.0, ::), which would open the
	// unauthenticated endpoint on every interface, and never with a port:
	// that is MonitorPort.
	Monitor string `yaml:"monitor"`
	// MonitorPort is the monitoring port; default 8222.
	MonitorPort int `yaml:"monitor_port,omitempty"`
}

// AMQP says how the RabbitMQ broker is reached.
type AMQP struct {
	// Names are every name the broker is dialled by, as Bus.Names: its
	// certificate carries all of them; the first is written into
	// credentials.
	Names []string `yaml:"names"`
	// Port is the broker's AMQP port (TLS); default wire.AMQPPort.
	Port int `yaml:"port,omitempty"`
	// Management is the host of the broker's management API (plain HTTP
	// on the private network; the controller alone uses it, as the
	// broker's administrator), as Bus.Monitor: never an unspecified
	// address, never with a port.
	Management string `yaml:"management"`
	// ManagementPort is its port; default DefaultManagementPort.
	ManagementPort int `yaml:"management_port,omitempty"`
}

// DefaultManagementPort is the management API's port unless AMQP says.
const DefaultManagementPort = 15672

// Node is a machine of the mesh and the modules assigned to it.
type Node struct {
	Name    string   `yaml:"name"`
	Modules []string `yaml:"modules,omitempty"`
}

// Module is a module's manifest: what it emits, consumes, serves and uses.
type Module struct {
	Name string `yaml:"name"`
	// Seat is the seat the module claims, if any (ADR 0079).
	Seat string `yaml:"seat,omitempty"`
	// Emits are the keys of the events the module emits.
	Emits []string `yaml:"emits,omitempty"`
	// Consumes are the events the module reacts to, as
	// "<module>.<key pattern>", with * and > wildcards in the key.
	Consumes []string `yaml:"consumes,omitempty"`
	// Tools are the tools the module serves.
	Tools []string `yaml:"tools,omitempty"`
	// ToolDocs say what each tool does and what it takes, by tool: what
	// the catalogue lists (wire.Catalogue). A tool without one is listed
	// with no description, taking any object.
	ToolDocs map[string]ToolDoc `yaml:"tool_docs,omitempty"`
	// Uses are the tools the module calls, as "<module or seat>.<tool>",
	// or "<module or seat>.*" for all of that module's tools.
	Uses []string `yaml:"uses,omitempty"`
	// Provides are the provisions the module offers (design 19,
	// provisioning). A provider emits the provisioner events and serves
	// the provisioner tools: derived from this field, never declared.
	Provides []string `yaml:"provides,omitempty"`
	// Language is the language the module is written in; it names the
	// SDK the module is built on (conformance/registry.yaml). Default
	// DefaultLanguage.
	Language string `yaml:"language,omitempty"`
	// Version is the version of the module the nodes run; a push that
	// changes it rolls the module out to every node it is assigned to.
	Version string `yaml:"version,omitempty"`
	// Artifact is the built artifact the nodes install and run as the
	// module's program (wire.Digest's spelling), one a build recorded;
	// none, a node runs the program it has.
	Artifact string `yaml:"artifact,omitempty"`
	// Compat makes the module the compatibility broker (design 25 §5):
	// the broker the mesh had, kept as it stands for the predecessor's
	// clients, until its retirement condition holds.
	Compat *Compat `yaml:"compat,omitempty"`
}

// Compat is the compatibility broker's manifest: whose clients it keeps,
// and when it may retire.
type Compat struct {
	// Users are the predecessor's users on the broker, and Vhosts its
	// virtual hosts: never the mesh's, which the mesh mints and changes.
	// A connection of one of those users, or to one of those virtual
	// hosts, is a client of the compatibility broker.
	Users  []string `yaml:"users"`
	Vhosts []string `yaml:"vhosts,omitempty"`
	// RetireAfter is the retirement condition: retirable once no client
	// has been connected for this long (a Go duration: "24h", "10m").
	RetireAfter string `yaml:"retire_after"`
}

// RetireAfterDuration is RetireAfter parsed (checked by Parse).
func (c Compat) RetireAfterDuration() time.Duration {
	d, _ := time.ParseDuration(c.RetireAfter)
	return d
}

// CompatBroker is the module declared the compatibility broker, if any.
func (m *Mesh) CompatBroker() (Module, bool) {
	for _, mod := range m.Modules {
		if mod.Compat != nil {
			return mod, true
		}
	}
	return Module{}, false
}

// ToolDoc is what the catalogue says of one tool.
type ToolDoc struct {
	Description string `yaml:"description,omitempty"`
	// Args is the JSON Schema of the tool's arguments, written in YAML: an
	// object schema (type: object).
	Args map[string]any `yaml:"args,omitempty"`
}

// MaxToolDescription bounds a tool's description.
const MaxToolDescription = 1024

// DefaultLanguage is a module's language when its manifest names none.
const DefaultLanguage = "go"

// LanguageOrDefault is the module's language.
func (mod Module) LanguageOrDefault() string {
	if mod.Language == "" {
		return DefaultLanguage
	}
	return mod.Language
}

// AllEmits are the keys the module emits: those declared, and for a
// provider the provisioner events.
func (mod Module) AllEmits() []string {
	if len(mod.Provides) == 0 {
		return mod.Emits
	}
	return compactAppend(mod.Emits, wire.ProvisionerEvents)
}

// AllTools are the tools the module serves: those declared, and for a
// provider the provisioner tools.
func (mod Module) AllTools() []string {
	if len(mod.Provides) == 0 {
		return mod.Tools
	}
	return compactAppend(mod.Tools, wire.ProvisionerTools)
}

// compactAppend appends the items of more not already in list.
func compactAppend(list, more []string) []string {
	out := slices.Clone(list)
	for _, it := range more {
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// Person is a person with a client on the bus.
type Person struct {
	Name string `yaml:"name"`
	// Tools are the tools the person may call, in the form of Module.Uses;
	// "*" alone grants every tool in the mesh (an administrator).
	Tools []string `yaml:"tools,omitempty"`
}

// Token is an enrolment token, unspent.
type Token struct {
	ID string `yaml:"id"`
}

// versionPattern is what a module's version may be.
var versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// ErrInvalid is wrapped by every refusal of a description.
var ErrInvalid = errors.New("invalid mesh description")

// Load reads and checks a mesh description file.
func Load(path string) (*Mesh, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read mesh description: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse decodes and checks a mesh description. Unknown fields are refused
// so that a misspelt field is not silently a missing one, and so is a
// second YAML document, so that what follows a stray "---" is not silently
// ignored.
func Parse(data []byte) (*Mesh, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Mesh
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty (no YAML document)", ErrInvalid)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fmt.Errorf("%w: after the first document: %v", ErrInvalid, err)
	default:
		return nil, fmt.Errorf("%w: a second YAML document begins at line %d: a mesh description is one document", ErrInvalid, next.Line)
	}
	m.applyDefaults()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Mesh) applyDefaults() {
	if m.Bus.Port == 0 {
		m.Bus.Port = DefaultClientPort
	}
	if m.Bus.MonitorPort == 0 {
		m.Bus.MonitorPort = DefaultMonitorPort
	}
	if m.AMQP != nil && m.AMQP.Port == 0 {
		m.AMQP.Port = wire.AMQPPort
	}
	if m.AMQP != nil && m.AMQP.ManagementPort == 0 {
		m.AMQP.ManagementPort = DefaultManagementPort
	}
}

// Module returns the manifest of the named module.
func (m *Mesh) Module(name string) (Module, bool) {
	i := slices.IndexFunc(m.Modules, func(mod Module) bool { return mod.Name == name })
	if i < 0 {
		return Module{}, false
	}
	return m.Modules[i], true
}

// Placement is one module assigned to one node: one user on the bus.
type Placement struct {
	Node   string
	Module Module
}

// Placements lists every module on every node, in description order.
func (m *Mesh) Placements() []Placement {
	var out []Placement
	for _, n := range m.Nodes {
		for _, name := range n.Modules {
			mod, _ := m.Module(name)
			out = append(out, Placement{Node: n.Name, Module: mod})
		}
	}
	return out
}

// ToolRef is one tool of one module.
type ToolRef struct {
	Module string
	Tool   string
}

// ResolveTools turns "uses"-style entries into the tools they name, a seat
// resolved to the module that claims it and every wildcard expanded to
// the tools the manifests declare ("pg.*" is pg's declared tools, "*"
// every module's). A wildcard never reaches the provisioner tools, which
// retire and delete a consumer and are asked by the controller alone (ADR
// 0230); naming one is refused by Validate. It assumes a valid
// description and returns the references sorted and without repeats.
func (m *Mesh) ResolveTools(entries []string) []ToolRef {
	var out []ToolRef
	add := func(mod Module) {
		for _, t := range mod.Tools {
			out = append(out, ToolRef{Module: mod.Name, Tool: t})
		}
	}
	for _, e := range entries {
		if e == "*" {
			for _, mod := range m.Modules {
				add(mod)
			}
			continue
		}
		target, tool, _ := strings.Cut(e, ".")
		mod, _ := m.Module(m.holder(target))
		if tool == "*" {
			add(mod)
			continue
		}
		out = append(out, ToolRef{Module: mod.Name, Tool: tool})
	}
	slices.SortFunc(out, func(a, b ToolRef) int { return strings.Compare(a.Module+"."+a.Tool, b.Module+"."+b.Tool) })
	return slices.Compact(out)
}

// holder resolves a module or seat name to the module's name.
func (m *Mesh) holder(target string) string {
	for _, mod := range m.Modules {
		if mod.Seat == target {
			return mod.Name
		}
	}
	return target
}

// Validate checks the whole description and reports every problem found,
// each naming its entry.
func (m *Mesh) Validate() error {
	var errs *multierror.Error
	bad := func(where string, format string, args ...any) {
		errs = multierror.Append(errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
	}

	if err := wire.CheckName(m.Name); err != nil {
		bad("name", "%v", err)
	}
	if len(m.Bus.Names) == 0 {
		bad("bus.names", "at least one name the bus is dialled by is required")
	}
	for i, n := range m.Bus.Names {
		if !isHostName(n) && net.ParseIP(n) == nil {
			bad(fmt.Sprintf("bus.names[%d] %q", i, n), "not a DNS name or an IP address")
		}
	}
	if err := checkMonitor(m.Bus.Monitor); err != nil {
		bad(fmt.Sprintf("bus.monitor %q", m.Bus.Monitor), "%v", err)
	}
	for _, p := range []struct {
		field string
		v     int
	}{{"bus.port", m.Bus.Port}, {"bus.monitor_port", m.Bus.MonitorPort}} {
		if p.v < 1 || p.v > 65535 {
			bad(p.field, "port %d out of range", p.v)
		}
	}
	if m.Bus.Port == m.Bus.MonitorPort {
		bad("bus.monitor_port", "equals bus.port %d", m.Bus.Port)
	}
	if a := m.AMQP; a != nil {
		if len(a.Names) == 0 {
			bad("amqp.names", "at least one name the broker is dialled by is required")
		}
		for i, n := range a.Names {
			if !isHostName(n) && net.ParseIP(n) == nil {
				bad(fmt.Sprintf("amqp.names[%d] %q", i, n), "not a DNS name or an IP address")
			}
		}
		if err := checkPrivateHost(a.Management, "amqp.management_port"); err != nil {
			bad(fmt.Sprintf("amqp.management %q", a.Management), "%v", err)
		}
		for _, p := range []struct {
			field string
			v     int
		}{{"amqp.port", a.Port}, {"amqp.management_port", a.ManagementPort}} {
			if p.v < 1 || p.v > 65535 {
				bad(p.field, "port %d out of range", p.v)
			}
		}
		if a.Port == a.ManagementPort {
			bad("amqp.management_port", "equals amqp.port %d", a.Port)
		}
	}

	seen := map[string]string{} // module and seat names share the uses namespace
	for i, mod := range m.Modules {
		where := fmt.Sprintf("modules[%d] %q", i, mod.Name)
		if err := wire.CheckName(mod.Name); err != nil {
			bad(where, "%v", err)
		}
		if slices.Contains(wire.ReservedModuleNames, mod.Name) {
			bad(where, "the name is reserved (%s)", strings.Join(wire.ReservedModuleNames, ", "))
		}
		if prev, dup := seen[mod.Name]; dup {
			bad(where, "duplicated name (also %s)", prev)
		} else {
			seen[mod.Name] = where
		}
		if mod.Seat != "" {
			if err := wire.CheckName(mod.Seat); err != nil {
				bad(where+".seat", "%v", err)
			}
			if prev, dup := seen[mod.Seat]; dup && mod.Seat != mod.Name {
				bad(where+".seat", "seat %q is claimed twice or collides with a module name (also %s)", mod.Seat, prev)
			} else {
				seen[mod.Seat] = where + ".seat"
			}
			if mod.Seat == wire.CatalogSeat && mod.Name != wire.CatalogSeat {
				// A person's client asks the catalogue by the seat's name
				// (design 25 §7: mesh.mod.mesh-catalog.tool.catalog_tools).
				bad(where+".seat", "the module claiming seat %s is named after it: name it %q", wire.CatalogSeat, wire.CatalogSeat)
			}
		}
		checkList(bad, where+".emits", mod.Emits, wire.CheckKey)
		checkList(bad, where+".tools", mod.Tools, wire.CheckToolName)
		for j, t := range mod.Tools {
			if strings.HasPrefix(t, wire.ProvisionerToolPrefix) {
				bad(fmt.Sprintf("%s.tools[%d] %q", where, j, t), "tools named %s… are a provider's, derived from provides, never declared", wire.ProvisionerToolPrefix)
			}
		}
		checkToolDocs(bad, where+".tool_docs", mod)
		checkList(bad, where+".provides", mod.Provides, wire.CheckName)
		if mod.Language != "" {
			if err := wire.CheckName(mod.Language); err != nil {
				bad(where+".language", "%v", err)
			}
		}
		if mod.Artifact != "" {
			if err := wire.CheckDigest(mod.Artifact); err != nil {
				bad(where+".artifact", "%v", err)
			}
		}
		if mod.Version != "" && !versionPattern.MatchString(mod.Version) {
			bad(where+".version", "%q is not a version: letters, digits and . _ + -, at most 64, starting with a letter or digit", mod.Version)
		}
	}

	for i, mod := range m.Modules {
		where := fmt.Sprintf("modules[%d] %q", i, mod.Name)
		for j, c := range mod.Consumes {
			m.checkConsume(bad, fmt.Sprintf("%s.consumes[%d] %q", where, j, c), c)
		}
		m.checkToolRefs(bad, where+".uses", mod.Uses, false)
		for j, u := range mod.Uses {
			if target, _, _ := strings.Cut(u, "."); m.holder(target) == mod.Name {
				// A module that may call its own tool can ask itself with
				// any reply subject it likes and answer it (allow_responses):
				// a way to write wherever it wants with one credential.
				bad(fmt.Sprintf("%s.uses[%d] %q", where, j, u), "a module may not use its own tools")
			}
		}
	}

	m.checkCompat(bad)

	nodes := map[string]string{}
	assigned := map[string]bool{}
	broker := "" // where the module claiming wire.BrokerSeat is first placed
	for i, n := range m.Nodes {
		where := fmt.Sprintf("nodes[%d] %q", i, n.Name)
		if err := wire.CheckName(n.Name); err != nil {
			bad(where, "%v", err)
		}
		if n.Name == wire.SourceNode {
			// Its host could publish under mesh.control.source.>, the
			// repositories' announcements.
			bad(where, "the name %q is reserved for the source repositories' subjects", wire.SourceNode)
		}
		if prev, dup := nodes[n.Name]; dup {
			bad(where, "duplicated name (also %s)", prev)
		} else {
			nodes[n.Name] = where
		}
		here := map[string]bool{}
		for j, name := range n.Modules {
			w := fmt.Sprintf("%s.modules[%d] %q", where, j, name)
			if _, ok := m.Module(name); !ok {
				bad(w, "unknown module")
			}
			if here[name] {
				bad(w, "assigned twice to the same node")
			}
			if mod, ok := m.Module(name); ok && mod.Seat == wire.BrokerSeat && !here[name] {
				// One server per mesh (ADR 0079).
				if broker != "" {
					bad(w, "seat %s is assigned twice: here and at %s; one server holds it per mesh", wire.BrokerSeat, broker)
				} else {
					broker = w
				}
			}
			here[name] = true
			assigned[name] = true
		}
	}
	if len(m.Nodes) == 0 {
		bad("nodes", "at least one node is required")
	}

	persons := map[string]string{}
	for i, p := range m.Persons {
		where := fmt.Sprintf("persons[%d] %q", i, p.Name)
		if err := wire.CheckName(p.Name); err != nil {
			bad(where, "%v", err)
		}
		if prev, dup := persons[p.Name]; dup {
			bad(where, "duplicated name (also %s)", prev)
		} else {
			persons[p.Name] = where
		}
		m.checkToolRefs(bad, where+".tools", p.Tools, true)
	}
	tokens := map[string]string{}
	for i, t := range m.Tokens {
		where := fmt.Sprintf("tokens[%d] %q", i, t.ID)
		if err := wire.CheckName(t.ID); err != nil {
			bad(where, "%v", err)
		}
		if prev, dup := tokens[t.ID]; dup {
			bad(where, "duplicated id (also %s)", prev)
		} else {
			tokens[t.ID] = where
		}
	}

	sources := map[string]string{}
	for i, src := range m.Sources {
		where := fmt.Sprintf("sources[%d] %q", i, src.Name)
		if err := wire.CheckName(src.Name); err != nil {
			bad(where, "%v", err)
		}
		if prev, dup := sources[src.Name]; dup {
			bad(where, "duplicated name (also %s)", prev)
		} else {
			sources[src.Name] = where
		}
	}

	if errs == nil {
		return nil
	}
	errs.ErrorFormat = listErrors
	return fmt.Errorf("%w:\n%w", ErrInvalid, errs)
}

func listErrors(errs []error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = "  - " + e.Error()
	}
	return strings.Join(lines, "\n")
}

func checkList(bad func(string, string, ...any), where string, items []string, check func(string) error) {
	seen := map[string]bool{}
	for i, it := range items {
		w := fmt.Sprintf("%s[%d] %q", where, i, it)
		if err := check(it); err != nil {
			bad(w, "%v", err)
		}
		if seen[it] {
			bad(w, "duplicated")
		}
		seen[it] = true
	}
}

// checkToolDocs checks that each documented tool is one the module
// serves, its description bounded, its arguments an object schema and a
// valid JSON Schema (checkArgsJSONSchema).
func checkToolDocs(bad func(string, string, ...any), where string, mod Module) {
	for _, tool := range slices.Sorted(maps.Keys(mod.ToolDocs)) {
		w := fmt.Sprintf("%s[%q]", where, tool)
		doc := mod.ToolDocs[tool]
		if !slices.Contains(mod.Tools, tool) {
			bad(w, "module %q does not serve tool %q (it serves %v)", mod.Name, tool, mod.Tools)
		}
		if len(doc.Description) > MaxToolDescription {
			bad(w+".description", "%d bytes, more than %d", len(doc.Description), MaxToolDescription)
		}
		if doc.Args != nil {
			if err := wire.CheckArgsSchema(doc.ArgsSchema()); err != nil {
				bad(w, "%v", err)
			} else if err := checkArgsJSONSchema(doc.ArgsSchema()); err != nil {
				bad(w, "%v", err)
			}
		}
	}
}

// ArgsSchema is the JSON Schema of the tool's arguments: its Args in
// JSON, or wire.AnyObject when it gives none.
func (d ToolDoc) ArgsSchema() json.RawMessage {
	if d.Args == nil {
		return wire.AnyObject
	}
	b, err := json.Marshal(d.Args)
	if err != nil {
		// YAML that JSON cannot spell (a map keyed by numbers): refused by
		// the check as not an object schema.
		return json.RawMessage(`null`)
	}
	return b
}

// Catalogue is what the catalogue lists: every tool the manifests
// declare, with what their tool_docs say of it. The provisioner tools are
// not in it: they are the controller's alone (ADR 0230).
func (m *Mesh) Catalogue() wire.Catalogue {
	c := wire.Catalogue{Tools: []wire.ToolInfo{}}
	for _, mod := range m.Modules {
		for _, t := range mod.Tools {
			doc := mod.ToolDocs[t]
			c.Tools = append(c.Tools, wire.ToolInfo{Module: mod.Name, Tool: t, Description: doc.Description, Args: doc.ArgsSchema()})
		}
	}
	slices.SortFunc(c.Tools, func(a, b wire.ToolInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return c
}

// HasCatalogue reports whether a module serves the catalogue: every
// person may then ask it (compose), and its node's declaration carries
// the catalogue.
func (m *Mesh) HasCatalogue() bool {
	mod, ok := m.Module(wire.CatalogSeat)
	return ok && mod.Seat == wire.CatalogSeat && slices.Contains(mod.Tools, wire.CatalogTool)
}

// checkConsume checks "<module>.<key pattern>": the module must exist and
// emit at least one key the pattern matches.
func (m *Mesh) checkConsume(bad func(string, string, ...any), where, c string) {
	source, pattern, ok := strings.Cut(c, ".")
	if !ok {
		bad(where, `want "<module>.<key pattern>"`)
		return
	}
	if err := wire.CheckKeyPattern(pattern); err != nil {
		bad(where, "%v", err)
		return
	}
	mod, ok := m.Module(source)
	if !ok {
		bad(where, "unknown module %q", source)
		return
	}
	for _, k := range mod.AllEmits() {
		if wire.MatchKey(pattern, k) {
			return
		}
	}
	bad(where, "no manifest emits it: module %q emits %v", source, mod.AllEmits())
}

// checkToolRefs checks "<module or seat>.<tool>" and "<module or seat>.*";
// a lone "*" is allowed where star is true.
func (m *Mesh) checkToolRefs(bad func(string, string, ...any), where string, refs []string, star bool) {
	for i, r := range refs {
		w := fmt.Sprintf("%s[%d] %q", where, i, r)
		if r == "*" && star {
			continue
		}
		target, tool, ok := strings.Cut(r, ".")
		if !ok {
			bad(w, `want "<module or seat>.<tool>" or "<module or seat>.*"`)
			continue
		}
		mod, ok := m.Module(m.holder(target))
		if !ok {
			bad(w, "unknown module or seat %q", target)
			continue
		}
		if tool == "*" {
			if len(mod.Tools) == 0 {
				bad(w, "module %q declares no tools (its provisioner tools are the controller's alone)", mod.Name)
			}
			continue
		}
		if slices.Contains(wire.ProvisionerTools, tool) {
			bad(w, "the provisioner tools retire and delete consumers and are asked by the controller alone (ADR 0230)")
			continue
		}
		if !slices.Contains(mod.AllTools(), tool) {
			bad(w, "module %q does not serve tool %q (it serves %v)", mod.Name, tool, mod.AllTools())
		}
	}
}

// checkMonitor checks the host the monitoring endpoint binds. The endpoint
// has no authentication, so the host must be one interface of the
// server's: a name (resolved inside its container) or an address, never
// an unspecified address, which binds every interface. nats-server reads
// "http" as host:port, so a host already holding a port (or brackets)
// would write a configuration it refuses to start with.
func checkMonitor(h string) error {
	if h == "" {
		return errors.New("the private host the monitoring endpoint binds is required")
	}
	return checkPrivateHost(h, "bus.monitor_port")
}

// checkPrivateHost checks the host of an unauthenticated or plain-HTTP
// endpoint on the private network; portField names where its port goes.
func checkPrivateHost(h, portField string) error {
	if h == "" {
		return errors.New("the endpoint's private host is required")
	}
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsUnspecified() {
			return errors.New("an unspecified address binds every interface, and the endpoint is for the private network only: name the server's private address or host")
		}
		return nil
	}
	if isHostName(h) {
		if isNumeric(lastLabel(h)) {
			// inet_aton reads "0" or "127.1" as an address, "0" as
			// 0.0.0.0: refuse the doubt.
			return errors.New("a host name whose last label is all digits is read as an address by some resolvers; write the address in full")
		}
		return nil
	}
	if _, port, err := net.SplitHostPort(h); err == nil {
		return fmt.Errorf("holds a port (%q): give the host alone and the port as %s", port, portField)
	}
	if strings.HasPrefix(h, "[") {
		return errors.New("write an IPv6 address without brackets")
	}
	return errors.New("not a DNS name or an IP address")
}

func lastLabel(h string) string {
	if i := strings.LastIndexByte(h, '.'); i >= 0 {
		return h[i+1:]
	}
	return h
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isHostName reports whether s is a DNS name: dot-separated labels of
// letters, digits and '-'.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// meshUserPrefixes are the user names the mesh mints on the broker: a
// node's host, a module's placement, a person, a token, a repository.
// The predecessor's users must be none of them, nor any the mesh could
// mint later (a node or a person added).
var meshUserPrefixes = []string{"host.", "mod.", "person.", "enrol.", "source."}

// checkCompat checks the compatibility broker's manifest: one at most,
// on the broker the description names, placed on no node (the broker
// stands as it is), its users and virtual hosts the predecessor's alone,
// and a retirement condition.
func (m *Mesh) checkCompat(bad func(where, format string, args ...any)) {
	first := ""
	for i, mod := range m.Modules {
		if mod.Compat == nil {
			continue
		}
		where := fmt.Sprintf("modules[%d] %q.compat", i, mod.Name)
		if first != "" {
			bad(where, "a second compatibility broker (also %s): the mesh had one broker", first)
			continue
		}
		first = where
		if m.AMQP == nil {
			bad(where, "the description names no broker (amqp:) for it to keep")
		}
		for j, n := range m.Nodes {
			if slices.Contains(n.Modules, mod.Name) {
				bad(where, "placed on nodes[%d] %q: the compatibility broker is the broker as it stands, run by no host", j, n.Name)
			}
		}
		if len(mod.Emits)+len(mod.Consumes)+len(mod.Tools)+len(mod.Uses)+len(mod.Provides) > 0 {
			bad(where, "it has no account on the bus: no emits, consumes, tools, uses or provides")
		}
		if len(mod.Compat.Users) == 0 {
			bad(where+".users", "the predecessor's users are required: their connections are the broker's clients")
		}
		for j, u := range mod.Compat.Users {
			w := fmt.Sprintf("%s.users[%d] %q", where, j, u)
			switch {
			case u == "" || strings.ContainsAny(u, " \t\r\n"):
				bad(w, "not a user name")
			case u == wire.ControllerUser || u == wire.ControllerMeshUser || u == wire.AMQPAdminUser || u == wire.BuilderUser:
				bad(w, "a user of the mesh's own: the predecessor's users are never the mesh's")
			case slices.ContainsFunc(meshUserPrefixes, func(p string) bool { return strings.HasPrefix(u, p) }):
				bad(w, "named as the mesh names its users (%s…): the mesh could mint it", strings.Join(meshUserPrefixes, "…, "))
			}
		}
		for j, v := range mod.Compat.Vhosts {
			w := fmt.Sprintf("%s.vhosts[%d] %q", where, j, v)
			if v == "" || v == wire.AMQPVhost || v == wire.AMQPControlVhost {
				bad(w, "the mesh's own virtual host (%s, %s): the predecessor's are never the mesh's", wire.AMQPVhost, wire.AMQPControlVhost)
			}
		}
		if d, err := time.ParseDuration(mod.Compat.RetireAfter); err != nil || d <= 0 {
			bad(where+".retire_after", "%q is not a duration above zero (\"24h\", \"10m\")", mod.Compat.RetireAfter)
		}
	}
}
