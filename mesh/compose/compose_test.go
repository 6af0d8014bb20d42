package compose

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func sample(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fakeHashes stands in for bcrypt hashes: the golden file must not depend
// on random salt.
func fakeHashes(m *meshdesc.Mesh) map[string]string {
	h := map[string]string{}
	for _, p := range Principals(m) {
		h[p.User] = "$2a$04$hash-of-" + p.User
	}
	return h
}

func TestConfigGolden(t *testing.T) {
	m := sample(t)
	got, err := Config(m, Inputs{Hashes: fakeHashes(m)})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.nats.conf")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./mesh/compose -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("composed configuration differs from %s (run with -update after checking the diff):\n%s", golden, got)
	}
	again, _ := Config(m, Inputs{Hashes: fakeHashes(m)})
	if !bytes.Equal(got, again) {
		t.Fatal("expected the same bytes from the same inputs")
	}
}

// TestTheEnrolmentAccountIsComposedWithoutTokens: with no token
// outstanding, the enrolment account is still there with its imports and
// the control account's exports, and no users: a token issued later only
// adds a user to it (docs/decisions/0003-enrolment-account-from-genesis.md).
func TestTheEnrolmentAccountIsComposedWithoutTokens(t *testing.T) {
	m := sample(t)
	m.Tokens = nil
	accts := composed(t, m).Accounts
	enrol, ok := accts[wire.AccountEnrol]
	toEnrol := 0
	for _, e := range accts[wire.AccountControl].Exports {
		if slices.Contains(e.Accounts, wire.AccountEnrol) {
			toEnrol++
		}
	}
	if !ok || len(enrol.Users) != 0 || len(enrol.Imports) != 2 || toEnrol != 2 {
		t.Fatalf("expected the enrolment account with its two imports, no users, and the control account's two exports to it, got %+v and %+v", enrol, accts[wire.AccountControl])
	}
}

// composed is m's configuration as the server reads it back.
func composed(t *testing.T, m *meshdesc.Mesh) config {
	t.Helper()
	data, err := Config(m, Inputs{Hashes: fakeHashes(m)})
	if err != nil {
		t.Fatal(err)
	}
	var cfg config
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestConfigRefusesMissingHash(t *testing.T) {
	m := sample(t)
	h := fakeHashes(m)
	delete(h, wire.ModuleUser("node-b", "logger"))
	if _, err := Config(m, Inputs{Hashes: h}); err == nil || !strings.Contains(err.Error(), "mod.node-b.logger") {
		t.Fatalf("expected a refusal naming mod.node-b.logger, got %v", err)
	}
}

// TestModuleGrantsComeFromTheManifest rebuilds each module user's grants
// from its manifest alone, independently of the composer's code path.
func TestModuleGrantsComeFromTheManifest(t *testing.T) {
	m := sample(t)
	byUser := index(Principals(m))
	for _, pl := range m.Placements() {
		mod, node := pl.Module, pl.Node
		var pub, sub []string
		for _, k := range mod.Emits {
			pub = append(pub, "mesh.mod."+mod.Name+".event."+k)
		}
		for _, u := range mod.Uses {
			target, tool, _ := strings.Cut(u, ".")
			for _, other := range m.Modules {
				if other.Seat == target {
					target = other.Name
				}
			}
			if tool == "*" {
				pub = append(pub, "mesh.mod."+target+".tool.*", "mesh.mod."+target+".again.*")
			} else {
				pub = append(pub, "mesh.mod."+target+".tool."+tool, "mesh.mod."+target+".again."+tool)
			}
		}
		if len(mod.Consumes) > 0 {
			c := node + "_" + mod.Name
			pub = append(pub, "$JS.API.CONSUMER.INFO.EVENTS."+c, "$JS.API.CONSUMER.MSG.NEXT.EVENTS."+c, "$JS.ACK.EVENTS."+c+".>")
		}
		sub = append(sub, "_INBOX."+mod.Name+"."+node+".>")
		for _, tool := range mod.Tools {
			sub = append(sub, "mesh.mod."+mod.Name+".tool."+tool, "mesh.mod."+mod.Name+".again."+tool)
		}
		// What it consumes comes through its consumer: no core
		// subscription on another module's events (a forged PubAck).
		slices.Sort(pub)
		slices.Sort(sub)
		got := byUser["mod."+node+"."+mod.Name]
		if !slices.Equal(got.Permissions.Publish, pub) {
			t.Errorf("%s publish: expected %v, got %v", got.User, pub, got.Permissions.Publish)
		}
		if !slices.Equal(got.Permissions.Subscribe, sub) {
			t.Errorf("%s subscribe: expected %v, got %v", got.User, sub, got.Permissions.Subscribe)
		}
		if got.Permissions.AllowResponses != (len(mod.Tools) > 0) {
			t.Errorf("%s allow_responses: expected %v (serves %d tools)", got.User, len(mod.Tools) > 0, len(mod.Tools))
		}
	}
}

// TestAManifestChangeTouchesOnlyItsModule: grants derive from the
// manifests and nothing else, so editing one manifest changes the grants
// of that module's users and of nobody else but those granted its tools
// by a wildcard, which now names the new tool (bob's "*").
func TestAManifestChangeTouchesOnlyItsModule(t *testing.T) {
	m := sample(t)
	before := index(Principals(m))
	i := slices.IndexFunc(m.Modules, func(mod meshdesc.Module) bool { return mod.Name == "sensor" })
	m.Modules[i].Emits = append(m.Modules[i].Emits, "battery.low")
	m.Modules[i].Tools = append(m.Modules[i].Tools, "reset")
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	after := index(Principals(m))
	for user, p := range after {
		changed := !samePerms(p.Permissions, before[user].Permissions)
		if mine := p.Module == "sensor" || p.User == wire.PersonUser("bob"); changed != mine {
			t.Errorf("%s: changed=%v, expected changed only for sensor's users", user, changed)
		}
	}
}

// TestInboxesAreScoped: nobody may subscribe a bare _INBOX.> or the whole
// tree, and each principal's only inbox grant is its own prefix.
func TestInboxesAreScoped(t *testing.T) {
	m := sample(t)
	for _, p := range Principals(m) {
		own := wire.Under(p.Credential().Inbox())
		inboxes := 0
		for _, s := range p.Permissions.Subscribe {
			if s == ">" || s == "_INBOX.>" || s == "_INBOX.*.>" {
				t.Errorf("%s may subscribe %q", p.User, s)
			}
			if strings.HasPrefix(s, "_INBOX.") {
				inboxes++
				if s != own {
					t.Errorf("%s may subscribe another inbox %q (its own is %q)", p.User, s, own)
				}
			}
		}
		if inboxes != 1 {
			t.Errorf("%s: expected exactly its own inbox grant, got %d", p.User, inboxes)
		}
		for _, s := range p.Permissions.Publish {
			if s == ">" || s == "_INBOX.>" {
				t.Errorf("%s may publish %q", p.User, s)
			}
		}
	}
}

func TestEveryPrincipalHasAUniqueUser(t *testing.T) {
	m := sample(t)
	seen := map[string]bool{}
	for _, p := range Principals(m) {
		if seen[p.User] {
			t.Fatalf("user %q composed twice", p.User)
		}
		seen[p.User] = true
	}
	// controller's two + 2 hosts + 3 placements + 2 persons + 1 token +
	// the builder + 1 source repository
	if len(seen) != 12 {
		t.Fatalf("expected 12 users, got %d: %v", len(seen), seen)
	}
}

func index(ps []Principal) map[string]Principal {
	out := map[string]Principal{}
	for _, p := range ps {
		out[p.User] = p
	}
	return out
}

func samePerms(a, b Permissions) bool {
	return slices.Equal(a.Publish, b.Publish) && slices.Equal(a.Subscribe, b.Subscribe) && a.AllowResponses == b.AllowResponses
}

// TestAProviderIsGrantedTheProvisionerEventsAndTools: design 19 derives a
// provider's provisioner events and tools from its providing, never from
// a declaration.
func TestAProviderIsGrantedTheProvisionerEventsAndTools(t *testing.T) {
	m, err := meshdesc.Parse([]byte(`
name: m
bus: {names: [nats], monitor: nats}
nodes: [{name: a, modules: [postgres]}]
modules:
  - {name: postgres, provides: [database]}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := index(Principals(m))[wire.ModuleUser("a", "postgres")]
	for _, key := range wire.ProvisionerEvents {
		if !slices.Contains(p.Permissions.Publish, wire.EventSubject("postgres", key)) {
			t.Errorf("expected the provider to publish %s, grants %v", key, p.Permissions.Publish)
		}
	}
	for _, tool := range wire.ProvisionerTools {
		if !slices.Contains(p.Permissions.Subscribe, wire.ToolSubject("postgres", tool)) {
			t.Errorf("expected the provider to serve %s, grants %v", tool, p.Permissions.Subscribe)
		}
	}
	if !p.Permissions.AllowResponses {
		t.Error("expected a provider to answer its tools (allow_responses)")
	}
}

// TestTheEnrolmentAccountsBoundGrowsWithItsTokens: the connections the
// enrolment account admits are EnrolConnectionsPerToken a token, never
// fewer than EnrolConnectionsMin.
func TestTheEnrolmentAccountsBoundGrowsWithItsTokens(t *testing.T) {
	l := DefaultLimits()
	for _, n := range []int{0, 1, l.EnrolConnectionsMin / l.EnrolConnectionsPerToken, 100} {
		m := sample(t)
		m.Tokens = nil
		for i := range n {
			m.Tokens = append(m.Tokens, meshdesc.Token{ID: fmt.Sprintf("tok-%012d", i)})
		}
		want := max(l.EnrolConnectionsMin, l.EnrolConnectionsPerToken*n)
		if got := composed(t, m).Accounts[wire.AccountEnrol].Limits.MaxConnections; got != want {
			t.Errorf("%d tokens: expected the enrolment account bounded at %d connections, got %d", n, want, got)
		}
	}
}

// TestAHostIsGrantedWhatItUses: issue 18 §7 — a host subscribes its own
// inbox and nothing else, and answers nothing (no allow_responses): no
// code of the host serves the controller's old command subjects
// (mesh.ask.<node>.>). It is in the hosts' account (docs/decisions/0007).
func TestAHostIsGrantedWhatItUses(t *testing.T) {
	for _, p := range Principals(sample(t)) {
		if p.Kind != wire.PrincipalHost {
			continue
		}
		if p.Account != wire.AccountHosts || p.Permissions.AllowResponses ||
			!slices.Equal(p.Permissions.Subscribe, []string{wire.Under(wire.HostInbox(p.Node))}) {
			t.Errorf("%s: account %s, subscribe %v, allow_responses %v; want %s, its inbox alone, no responses",
				p.User, p.Account, p.Permissions.Subscribe, p.Permissions.AllowResponses, wire.AccountHosts)
		}
		for _, g := range append(slices.Clone(p.Permissions.Publish), p.Permissions.Subscribe...) {
			if strings.HasPrefix(g, "mesh.ask.") {
				t.Errorf("%s is granted %s", p.User, g)
			}
		}
	}
}
