package wire

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
)

// TestADeclarationIsTheSameHoweverItsConfigurationIsSpelled: signed from
// a configuration spelled as a store kept it, a declaration is the same
// bytes; and one applied, published again in another spelling, is the
// same declaration, while another value is not.
func TestADeclarationIsTheSameHoweverItsConfigurationIsSpelled(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	as := func(config string) Declaration {
		return Declaration{Node: "node-a", Revision: 2, Modules: []string{"mesh-catalog"}, Config: map[string]json.RawMessage{"mesh-catalog": json.RawMessage(config)}}
	}
	written, jsonb := as(`{"tools":[{"module":"sensor","tool":"calibrate"}],"n":1.50}`), as(`{"n": 1.50, "tools": [{"tool": "calibrate", "module": "sensor"}]}`)
	b1, s1, err := SignDeclaration(key, written)
	if err != nil {
		t.Fatal(err)
	}
	b2, s2, _ := SignDeclaration(key, jsonb)
	if string(b1) != string(b2) || s1 != s2 {
		t.Fatalf("signed differently:\n%s\n%s", b1, b2)
	}
	if !SameDeclaration(written, jsonb) {
		t.Error("the same configuration in another spelling is not the same declaration")
	}
	for name, other := range map[string]Declaration{
		"another value":    as(`{"n":1.5,"tools":[]}`),
		"another revision": func() Declaration { d := written; d.Revision = 3; return d }(),
		"no configuration": {Node: "node-a", Revision: 2, Modules: []string{"mesh-catalog"}},
	} {
		if SameDeclaration(written, other) {
			t.Errorf("%s: taken for the same declaration", name)
		}
	}
}
