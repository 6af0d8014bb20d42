package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestJudge: a declaration is taken only after the one applied, by NODES
// sequence and by its own revision.
func TestJudge(t *testing.T) {
	was := Applied{Seq: 5, Declaration: wire.Declaration{Node: "a", Revision: 3}}
	for _, c := range []struct {
		name string
		rev  uint64
		seq  uint64
		want string
	}{
		{"newer", 4, 6, ""},
		{"a newer revision at an older sequence", 4, 4, "NODES sequence 4 is not after 5"},
		{"the same sequence", 3, 5, "NODES sequence 5 is not after 5"},
		{"an older revision published anew", 2, 9, "revision 2 (NODES sequence 9) is not after 3"},
		{"the same revision published anew", 3, 9, "revision 3 (NODES sequence 9) is not after 3"},
	} {
		got := judge(was, wire.Declaration{Node: "a", Revision: c.rev}, c.seq)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: judged %q, want %q", c.name, got, c.want)
		}
	}
	if got := judge(Applied{}, wire.Declaration{Node: "a", Revision: 1}, 1); got != "" {
		t.Errorf("the first declaration: refused %q", got)
	}
}

// TestTheDeclarationAppliedPublishedAgainIsNoRefusal: the one applied, at
// a later sequence, its configuration spelled as a store kept it (a
// controller restarted signs it again from PostgreSQL's jsonb), is taken
// as applied; the same revision saying something else is still judged,
// and refused.
func TestTheDeclarationAppliedPublishedAgainIsNoRefusal(t *testing.T) {
	decl := func(config string) wire.Declaration {
		return wire.Declaration{Node: "node-a", Revision: 2, Modules: []string{"mesh-catalog"}, Config: map[string]json.RawMessage{"mesh-catalog": json.RawMessage(config)}}
	}
	was := Applied{Seq: 3, Declaration: decl(`{"tools":[{"module":"sensor","tool":"calibrate"}]}`)}
	again := decl(`{"tools": [{"tool": "calibrate", "module": "sensor"}]}`)
	if !republished(was, again, 7) {
		t.Fatalf("the declaration applied, published again in another spelling, is judged %q", judge(was, again, 7))
	}
	if republished(was, again, 3) {
		t.Error("the same sequence is not a publication again")
	}
	other := decl(`{"tools":[]}`)
	if republished(was, other, 7) || judge(was, other, 7) == "" {
		t.Error("another configuration at the same revision was taken")
	}
}
