package provision

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

func TestReadGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "contributions.json")
	data := `[{"as": "billing", "node": "node-a", "secret": "s", "at": "2026-10-06T12:00:00Z", "values": {"database": "orders"}},
	          {"as": "ledger", "node": "node-a"}]`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	gs, err := ReadGrants(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 {
		t.Fatalf("expected 2 grants, got %d", len(gs))
	}
	g := gs[0]
	if g.Consumer != (Consumer{Module: "billing", Node: "node-a"}) || g.Secret != "s" ||
		!g.At.Equal(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)) || string(g.Values) != `{"database":"orders"}` {
		t.Errorf("expected billing on node-a with its secret, time and values, got %+v", g)
	}
	if gs[1].Consumer != (Consumer{Module: "ledger", Node: "node-a"}) {
		t.Errorf("expected ledger on node-a, got %+v", gs[1].Consumer)
	}
}

func TestReadGrantsRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadGrants(filepath.Join(dir, "absent.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("expected a missing file to be fs.ErrNotExist, got %v", err)
	}
	path := filepath.Join(dir, "contributions.json")
	for _, c := range []struct{ data, want string }{
		{`[{"as": "billing"}]`, `entries[0] (as "billing"): field node is missing`},
		{`[{"node": "node-a"}]`, `entries[0]: field as is missing`},
	} {
		if err := os.WriteFile(path, []byte(c.data), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadGrants(path)
		if !errors.Is(err, wire.ErrBadContributions) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("expected a refusal naming %s and %q, got %v", path, c.want, err)
		}
	}
}

func TestGrantLogValueLeavesTheSecretOut(t *testing.T) {
	g := Grant{Consumer: Consumer{Module: "billing", Node: "node-a"}, Secret: "hunter2"}
	if s := g.LogValue().String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "billing") {
		t.Fatalf("expected the consumer and not the secret, got %s", s)
	}
}

// TestGrantFixture reads the conformance fixture every implementation
// reads and checks it yields the module and node the expected reading
// says (design 19: "A grant names a consumer").
func TestGrantFixture(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "features", "fixtures")
	gs, err := ReadGrants(filepath.Join(dir, "grant.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "grant.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []struct {
		Module string `json:"module"`
		Node   string `json:"node"`
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(gs) != len(want) || len(want) < 2 {
		t.Fatalf("expected %d grants (at least two), got %d", len(want), len(gs))
	}
	nodes := map[string]int{}
	for i, g := range gs {
		if g.Module != want[i].Module || g.Node != want[i].Node {
			t.Errorf("grant %d: expected %s on %s, got %s on %s", i, want[i].Module, want[i].Node, g.Module, g.Node)
		}
		nodes[g.Node]++
	}
	if nodes[gs[0].Node] < 2 {
		t.Error("expected the fixture to hold two modules on one node")
	}
}
