package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestParseEnrolRequest(t *testing.T) {
	good := EnrolRequest{Token: "tok-1a2b", Proof: "s3cret", SealingKey: "key", Reply: EnrolInbox("tok-1a2b") + ".r1"}
	got, err := ParseEnrolRequest(good.Marshal())
	if err != nil || got != good {
		t.Fatalf("a good request: %+v, %v", got, err)
	}
	for name, data := range map[string]string{
		"not JSON":            `{`,
		"two values":          string(good.Marshal()) + `{}`,
		"an unknown field":    strings.Replace(string(good.Marshal()), `"token"`, `"node":"x","token"`, 1),
		"no proof":            `{"token":"tok-1a2b","sealing_key":"k","reply":"` + EnrolInbox("tok-1a2b") + `.r"}`,
		"another token's box": `{"token":"tok-1a2b","proof":"p","sealing_key":"k","reply":"` + EnrolInbox("tok-other") + `.r"}`,
		"a stream's subject":  `{"token":"tok-1a2b","proof":"p","sealing_key":"k","reply":"mesh.control.built"}`,
		"a wildcard reply":    `{"token":"tok-1a2b","proof":"p","sealing_key":"k","reply":"` + EnrolInbox("tok-1a2b") + `.>"}`,
		"a bad token id":      `{"token":"Tok.1","proof":"p","sealing_key":"k","reply":"` + EnrolInbox("Tok.1") + `.r"}`,
		"too long":            `{"token":"tok-1a2b","proof":"` + strings.Repeat("p", MaxEnrolRequest) + `","sealing_key":"k","reply":"` + EnrolInbox("tok-1a2b") + `.r"}`,
	} {
		if _, err := ParseEnrolRequest([]byte(data)); !errors.Is(err, ErrEnrolRequest) {
			t.Errorf("%s: expected ErrEnrolRequest, got %v", name, err)
		}
	}
}

// TestNodeOfSubjects reads the node back out of each subject made of one,
// and nothing out of a subject that is not one.
func TestNodeOfSubjects(t *testing.T) {
	for _, c := range []struct {
		of    func(string) (string, bool)
		spell func(string) string
	}{{NodeOfReport, NodeReport}, {NodeOfCredentials, NodeCredentials}, {NodeOfDeclare, NodeDeclare}} {
		if node, ok := c.of(c.spell("node-a")); !ok || node != "node-a" {
			t.Errorf("%s: read %q, %v", c.spell("node-a"), node, ok)
		}
		for _, bad := range []string{c.spell("a.b"), c.spell("*"), c.spell(">"), c.spell(""), "mesh.control.enrol", SubjectPush, c.spell("node-a") + ".x"} {
			if node, ok := c.of(bad); ok {
				t.Errorf("%q read as node %q", bad, node)
			}
		}
	}
}
