package compose_test

// Fuzz targets of the composition: a fuzzed mesh description, loaded and
// checked by meshdesc; when it is valid, what compose derives from it must
// hold the permission model's invariants. They are written against the
// public API alone (Principals, Permissions, Config), since the internals
// are being rewritten. Seed corpora: testdata/fuzz/<target>/.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// FuzzComposition reads the fuzzed bytes as a mesh description.
func FuzzComposition(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		m, err := meshdesc.Parse([]byte(text))
		if err != nil {
			if !errors.Is(err, meshdesc.ErrInvalid) {
				t.Fatalf("refused without ErrInvalid: %v", err)
			}
			return
		}
		checkComposition(t, m)
	})
}

// FuzzCompositionGenerated builds a description from the fuzzed bytes, a
// choice per byte among names, keys, patterns and tools that can meet, so
// that most inputs are descriptions meshdesc accepts, and checks the same
// invariants.
func FuzzCompositionGenerated(f *testing.F) {
	f.Fuzz(func(t *testing.T, choices []byte) {
		text, err := yaml.Marshal(generate(choices))
		if err != nil {
			t.Fatal(err)
		}
		m, err := meshdesc.Parse(text)
		if err != nil {
			if !errors.Is(err, meshdesc.ErrInvalid) {
				t.Fatalf("refused without ErrInvalid: %v", err)
			}
			return
		}
		checkComposition(t, m)
	})
}

// checkComposition is the permission model, checked on what compose
// derives from a valid description m.
func checkComposition(t *testing.T, m *meshdesc.Mesh) {
	t.Helper()
	principals := compose.Principals(m)
	users := map[string]bool{}
	hashes := map[string]string{}
	for _, p := range principals {
		if users[p.User] {
			t.Fatalf("user %q composed twice", p.User)
		}
		users[p.User] = true
		hashes[p.User] = "$2a$04$hash-of-" + p.User

		// Nobody is granted everything, every inbox or the whole tree.
		for _, list := range [][]string{p.Permissions.Publish, p.Permissions.Subscribe} {
			for _, s := range list {
				if s == ">" || s == wire.AnyInbox || s == wire.SubjectAll || strings.HasPrefix(s, "*") {
					t.Fatalf("%s is granted %q", p.User, s)
				}
			}
		}
		// Only the controller speaks to the JetStream API as a whole.
		if p.Kind != wire.PrincipalController && slices.Contains(p.Permissions.Publish, wire.JetStreamAPI) {
			t.Fatalf("%s may publish %s", p.User, wire.JetStreamAPI)
		}
		// The only inbox a principal hears is its own.
		cred := p.Credential()
		for _, s := range p.Permissions.Subscribe {
			if strings.HasPrefix(s, strings.TrimSuffix(wire.AnyInbox, ">")) && s != wire.Under(cred.Inbox()) {
				t.Fatalf("%s may subscribe %q, not its own inbox %s", p.User, s, wire.Under(cred.Inbox()))
			}
		}
		// Its account is the one its kind belongs in (docs/decisions/0001).
		cred.URL = wire.BusURL(p.User, "pw", "nats:4222")
		if p.Account != cred.Account() {
			t.Fatalf("%s is in account %s; its kind belongs in %s", p.User, p.Account, cred.Account())
		}
		// The user is the one its identity derives (the credential's rule).
		cred.Fingerprint = strings.Repeat("0", 64)
		if cred.Principal == wire.PrincipalHost {
			cred.DeclarationKey = wire.EncodeDeclarationKey(make([]byte, 32))
		}
		if err := cred.Validate(); err != nil {
			t.Fatalf("%s: its credential would be refused: %v", p.User, err)
		}
		switch p.Kind {
		case wire.PrincipalModule:
			checkModule(t, m, p)
		case wire.PrincipalPerson:
			checkPerson(t, m, p)
		case wire.PrincipalEnrol:
			if !slices.Equal(p.Permissions.Publish, []string{wire.SubjectEnrol}) ||
				!slices.Equal(p.Permissions.Subscribe, []string{wire.Under(wire.EnrolInbox(p.Name))}) || p.Permissions.AllowResponses {
				t.Fatalf("%s may do more than enrol: %+v", p.User, p.Permissions)
			}
		}
	}
	for _, pl := range m.Placements() {
		if !users[wire.ModuleUser(pl.Node, pl.Module.Name)] {
			t.Fatalf("module %s on %s has no user", pl.Module.Name, pl.Node)
		}
	}
	checkConfig(t, m, hashes, users)
}

// checkModule: a module publishes only its own events, the tools it uses
// and its own consumer's JetStream subjects, and subscribes only its inbox
// and its own tools.
func checkModule(t *testing.T, m *meshdesc.Mesh, p compose.Principal) {
	t.Helper()
	mod, ok := m.Module(p.Module)
	if !ok {
		t.Fatalf("%s: no module %q in the description", p.User, p.Module)
	}
	pub := map[string]bool{}
	for _, k := range mod.AllEmits() {
		pub[wire.EventSubject(mod.Name, k)] = true
	}
	for _, use := range mod.Uses {
		target, tool, _ := strings.Cut(use, ".")
		holder := holderOf(m, target)
		if tool == "*" {
			// A wildcard is the declared tools, never the provisioner
			// tools, and never a wildcard grant.
			for _, t := range holder.Tools {
				pub[wire.ToolSubject(holder.Name, t)] = true
				pub[wire.ToolAgainSubject(holder.Name, t)] = true
			}
			continue
		}
		pub[wire.ToolSubject(holder.Name, tool)] = true
		pub[wire.ToolAgainSubject(holder.Name, tool)] = true
	}
	if len(mod.Consumes) > 0 {
		c := wire.ModuleConsumer(p.Node, mod.Name)
		pub[wire.ConsumerInfo(wire.StreamEvents, c)] = true
		pub[wire.ConsumerNext(wire.StreamEvents, c)] = true
		pub[wire.ConsumerAcks(wire.StreamEvents, c)] = true
	}
	for _, s := range p.Permissions.Publish {
		if !pub[s] {
			t.Fatalf("%s may publish %q: not its event, a tool it uses, or its consumer's", p.User, s)
		}
	}
	sub := map[string]bool{wire.Under(wire.ModuleInbox(p.Node, mod.Name)): true}
	for _, tool := range mod.AllTools() {
		sub[wire.ToolSubject(mod.Name, tool)] = true
		sub[wire.ToolAgainSubject(mod.Name, tool)] = true
	}
	// Nothing it consumes: that comes through its pull consumer, and a
	// core subscription would hear publishes with their reply subjects.
	for _, s := range p.Permissions.Subscribe {
		if !sub[s] {
			t.Fatalf("%s may subscribe %q: not its inbox or its own tool", p.User, s)
		}
	}
	if p.Permissions.AllowResponses != (len(mod.AllTools()) > 0) {
		t.Fatalf("%s: allow_responses %v, serving %d tools", p.User, p.Permissions.AllowResponses, len(mod.AllTools()))
	}
}

// checkPerson: a person publishes only the exact subjects of tools the
// manifests declare (each with its subject for asking again) ("*" is expanded, never granted as a wildcard), and
// hears only its inbox.
func checkPerson(t *testing.T, m *meshdesc.Mesh, p compose.Principal) {
	t.Helper()
	declared := map[string]bool{}
	for _, mod := range m.Modules {
		for _, tool := range mod.Tools {
			declared[wire.ToolSubject(mod.Name, tool)] = true
			declared[wire.ToolAgainSubject(mod.Name, tool)] = true
		}
	}
	for _, s := range p.Permissions.Publish {
		if !declared[s] {
			t.Fatalf("%s may publish %q: not a tool a manifest declares (a wildcard, a provisioner tool?)", p.User, s)
		}
	}
	if !slices.Equal(p.Permissions.Subscribe, []string{wire.Under(wire.PersonInbox(p.Name))}) || p.Permissions.AllowResponses {
		t.Fatalf("%s: hears %v (allow_responses %v); want its inbox alone", p.User, p.Permissions.Subscribe, p.Permissions.AllowResponses)
	}
}

// checkConfig: the configuration is JSON, carries every user once with
// its hash, and binds monitoring to the description's host and port,
// split the way nats-server splits it.
func checkConfig(t *testing.T, m *meshdesc.Mesh, hashes map[string]string, users map[string]bool) {
	t.Helper()
	conf, err := compose.Config(m, compose.Inputs{Hashes: hashes})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if !json.Valid(conf) {
		t.Fatalf("config is not JSON:\n%s", conf)
	}
	var doc struct {
		HTTP     string `json:"http"`
		Listen   string `json:"listen"`
		Accounts map[string]struct {
			Users []struct {
				User     string `json:"user"`
				Password string `json:"password"`
			} `json:"users"`
		} `json:"accounts"`
	}
	if err := json.Unmarshal(conf, &doc); err != nil {
		t.Fatalf("config: %v", err)
	}
	host, port, err := net.SplitHostPort(doc.HTTP)
	if err != nil || host != m.Bus.Monitor || port != strconv.Itoa(m.Bus.MonitorPort) {
		t.Fatalf("http %q: nats-server reads host %q port %q (%v); the description says %q port %d", doc.HTTP, host, port, err, m.Bus.Monitor, m.Bus.MonitorPort)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		t.Fatalf("monitoring on every interface: %q", doc.HTTP)
	}
	if _, port, err := net.SplitHostPort(doc.Listen); err != nil || port != strconv.Itoa(m.Bus.Port) {
		t.Fatalf("listen %q: want the client port %d", doc.Listen, m.Bus.Port)
	}
	seen := map[string]bool{}
	for _, a := range doc.Accounts {
		for _, u := range a.Users {
			if seen[u.User] || !users[u.User] || u.Password != hashes[u.User] {
				t.Fatalf("config user %q: twice, unknown, or not with its hash", u.User)
			}
			seen[u.User] = true
		}
	}
	if len(seen) != len(users) {
		t.Fatalf("config has %d users, compose %d", len(seen), len(users))
	}
}

func holderOf(m *meshdesc.Mesh, target string) meshdesc.Module {
	for _, mod := range m.Modules {
		if mod.Seat == target {
			return mod
		}
	}
	mod, _ := m.Module(target)
	return mod
}

// generate makes a description from choices, one byte per decision; the
// bytes running out end every list. Most choices are ones that meet (a
// consumed pattern made from a key the module emits, a used tool its
// module serves, distinct names), so that most inputs are descriptions
// meshdesc accepts; the rest are not, so that its refusals are fuzzed too.
func generate(choices []byte) meshdesc.Mesh {
	var (
		nodeNames   = []string{"node-a", "node-b", "n3"}
		moduleNames = []string{"sensor", "logger", "catalog", "pg", "kc", "app"}
		seats       = []string{"mesh-catalog", "mesh-db", "mesh-broker"}
		keys        = []string{"reading", "alarm.raised", "alarm.cleared", "x.y.z", "provisioner.failing"}
		patterns    = []string{"reading", "alarm.*", "alarm.>", ">", "*", "x.>", "provisioner.*"}
		tools       = []string{"calibrate", "catalog_tools", "t", "provisioner_delete"}
		monitors    = []string{"nats", "::1", "10.0.0.5", "fd00::5", "nats.internal", "127.0.0.1", "0.0.0.0", "nats:8222", "[::1]", "::"}
		persons     = []string{"alice", "bob", "carol"}
	)
	i := 0
	next := func(n int) int {
		if i >= len(choices) || n <= 0 {
			return 0
		}
		i++
		return int(choices[i-1]) % n
	}
	pick := func(list []string) string { return list[next(len(list))] }
	rare := func() bool { return next(16) == 0 } // a choice that may not meet
	// take removes and returns a name from *list: names stay distinct.
	take := func(list *[]string) string {
		j := next(len(*list))
		name := (*list)[j]
		*list = slices.Delete(slices.Clone(*list), j, j+1)
		return name
	}
	some := func(max int, item func() string) []string {
		var out []string
		for range next(max + 1) {
			if it := item(); !slices.Contains(out, it) || rare() {
				out = append(out, it)
			}
		}
		return out
	}

	m := meshdesc.Mesh{Name: "m", Bus: meshdesc.Bus{Names: []string{"nats"}}}
	m.Bus.Monitor = monitors[next(6)]
	if rare() {
		m.Bus.Monitor = pick(monitors)
	}
	for range 1 + next(len(moduleNames)) {
		mod := meshdesc.Module{Name: take(&moduleNames)}
		if rare() {
			mod.Name = "host"
		}
		if next(3) == 0 && len(seats) > 0 {
			mod.Seat = take(&seats)
		}
		mod.Emits = some(3, func() string { return pick(keys) })
		mod.Tools = some(2, func() string { return pick(tools) })
		if next(4) == 0 {
			mod.Provides = []string{"database"}
		}
		m.Modules = append(m.Modules, mod)
	}
	anyModule := func() meshdesc.Module { return m.Modules[next(len(m.Modules))] }
	consumed := func() string {
		src := anyModule()
		emits := src.AllEmits()
		if len(emits) == 0 || rare() {
			return src.Name + "." + pick(patterns)
		}
		key := pick(emits)
		first, _, _ := strings.Cut(key, ".")
		return src.Name + "." + []string{key, first + ".>", ">", key}[next(4)]
	}
	toolRef := func() string {
		target := anyModule()
		name := target.Name
		if target.Seat != "" && next(2) == 0 {
			name = target.Seat
		}
		served := target.AllTools()
		switch {
		case len(served) == 0 || rare():
			return name + "." + pick(tools)
		case next(3) == 0:
			return name + ".*"
		}
		return name + "." + pick(served)
	}
	for j := range m.Modules {
		m.Modules[j].Consumes = some(2, consumed)
		m.Modules[j].Uses = some(2, toolRef)
	}
	for range 1 + next(len(nodeNames)) {
		n := meshdesc.Node{Name: take(&nodeNames)}
		n.Modules = some(3, func() string { return anyModule().Name })
		m.Nodes = append(m.Nodes, n)
	}
	for range next(len(persons) + 1) {
		p := meshdesc.Person{Name: take(&persons)}
		p.Tools = some(2, func() string {
			if next(5) == 0 {
				return "*"
			}
			return toolRef()
		})
		m.Persons = append(m.Persons, p)
	}
	for k := range next(3) {
		m.Tokens = append(m.Tokens, meshdesc.Token{ID: fmt.Sprintf("tok-%d", k)})
	}
	return m
}
