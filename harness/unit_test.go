package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshbus/mesh/harness/topology"
)

func TestParseTop(t *testing.T) {
	titles := []string{"UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"}
	rows := [][]string{
		{"1000", "4242", "4200", "0", "10:00", "?", "00:00:00", "/mesh-nats --poll=1s"},
		{"1000", "4250", "4242", "0", "10:00", "?", "00:00:01", "/nats-server -c /etc/nats/nats.conf"},
	}
	got, err := parseTop(titles, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].PID != 4250 || got[1].PPID != 4242 || !strings.HasPrefix(got[1].Command, "/nats-server") {
		t.Fatalf("expected nats-server 4250 child of 4242, got %+v", got)
	}
	if got[1].UID != 1000 || got[1].GID != -1 {
		t.Errorf("ps -ef's table: uid %d (want 1000), gid %d (want -1, not in the table)", got[1].UID, got[1].GID)
	}
	ids, err := parseTop([]string{"PID", "PPID", "UID", "GID", "COMMAND"}, [][]string{{"7", "1", "50001", "50001", "mesh-module-sensor"}})
	if err != nil || len(ids) != 1 || ids[0].UID != 50001 || ids[0].GID != 50001 || ids[0].Command != "mesh-module-sensor" {
		t.Fatalf("expected sensor as 50001:50001, got %+v, %v", ids, err)
	}
	if _, err := parseTop([]string{"PID", "CMD"}, nil); err == nil {
		t.Fatal("expected an error for a table without PPID, got none")
	}
	if _, err := parseTop(titles, [][]string{{"x"}}); err == nil {
		t.Fatal("expected an error for a short row, got none")
	}
}

func TestParseProbe(t *testing.T) {
	r, err := parseProbe("{\"ok\":true,\"status\":200,\"body\":\"{}\",\"error\":\"\"}\n")
	if err != nil || !r.OK || r.Status != 200 || r.Body != "{}" {
		t.Fatalf("expected ok 200 {}, got %+v, %v", r, err)
	}
	r, err = parseProbe("noise\n{\"ok\":false,\"status\":0,\"body\":\"\",\"error\":\"connection refused\"}\n\n")
	if err != nil || r.OK || r.Error != "connection refused" {
		t.Fatalf("expected refused from the last line, got %+v, %v", r, err)
	}
	if _, err := parseProbe(""); err == nil {
		t.Fatal("expected an error for no output, got none")
	}
	if _, err := parseProbe("not json"); err == nil {
		t.Fatal("expected an error for a line that is not JSON, got none")
	}
}

func TestRoleNames(t *testing.T) {
	s := &Session{id: "ab12cd", roles: map[string]int{}}
	got := []string{s.roleName("probe"), s.roleName("probe"), s.roleName("genesis"), s.roleName("probe")}
	want := []string{"probe", "probe-2", "genesis", "probe-3"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("expected roles %v, got %v", want, got)
		}
	}
	if n := s.containerName("probe-2"); n != "mesh-ab12cd-probe-2" {
		t.Fatalf("expected mesh-ab12cd-probe-2, got %s", n)
	}
}

func TestPhases(t *testing.T) {
	p := newPhases("genesis cluster run=ab12")
	p.done("networks")
	p.done("genesis")
	if s := p.summary(); !strings.HasPrefix(s, "raised genesis cluster run=ab12: networks 0.0s, genesis 0.0s (total ") {
		t.Fatalf("unexpected summary %q", s)
	}
	if s := p.failed("nats"); !strings.Contains(s, "genesis 0.0s, nats FAILED after") {
		t.Fatalf("unexpected failure line %q", s)
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "… (1 lines before)\nb\nc" {
		t.Fatalf("unexpected tail %q", got)
	}
	if got := tail("a\n", 5); got != "a" {
		t.Fatalf("unexpected tail %q", got)
	}
}

func TestCutAfter(t *testing.T) {
	doc := []byte("{\n  \"listen\": \"0.0.0.0:4222\",\n  \"jetstream\": {\"store_dir\": \"/data\"},\n  \"accounts\": {\"A\": {}}\n}\n")
	got, err := CutAfter(doc, "jetstream")
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"listen\": \"0.0.0.0:4222\",\n  \"jetstream\": {\"store_dir\": \"/data\"},\n  "; string(got) != want {
		t.Fatalf("expected the document cut right after the jetstream block, %q, got %q", want, got)
	}
	if got, err := CutAfter(doc, "accounts"); err != nil || string(got) != string(doc[:len(doc)-3]) {
		t.Fatalf("expected the last member cut before the closing brace, got %q, %v", got, err)
	}
	if _, err := CutAfter(doc, "cluster"); !errors.Is(err, ErrNoMember) {
		t.Fatalf("expected ErrNoMember for a missing member, got %v", err)
	}
	if _, err := CutAfter([]byte(`["jetstream"]`), "jetstream"); err == nil {
		t.Fatal("expected an error for a document that is not an object, got none")
	}
}

// TestEveryMemberOfTheLivingTopologyHasARoleOfItsOwn: faults and Member
// find a member by its role; the hosts, several of one kind, by their
// node.
func TestEveryMemberOfTheLivingTopologyHasARoleOfItsOwn(t *testing.T) {
	seen := map[string]string{}
	for _, m := range topology.Living().Members {
		role := memberRole(m)
		if role == "" {
			t.Errorf("%s (%s) has no role", m.Name, m.Kind)
		}
		if other, ok := seen[role]; ok {
			t.Errorf("%s and %s share the role %q", m.Name, other, role)
		}
		seen[role] = m.Name
	}
	if memberRole(topology.Member{Name: "node-a", Kind: topology.KindHost}) != "node-a" || seen[RoleStore] != "store" {
		t.Errorf("roles %v", seen)
	}
}
