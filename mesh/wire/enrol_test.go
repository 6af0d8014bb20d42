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

func TestTokenRoundTrips(t *testing.T) {
	id, secret, err := ParseToken(" " + FormatToken("tok-1a2b", "s3cr_t-x") + "\n")
	if err != nil || id != "tok-1a2b" || secret != "s3cr_t-x" {
		t.Fatalf("round trip: %q %q %v", id, secret, err)
	}
	for _, bad := range []string{"", "tok-1a2b", ".secret", "tok-1a2b.", "Tok.secret"} {
		if _, _, err := ParseToken(bad); err == nil {
			t.Errorf("%q was read as a token", bad)
		}
	}
}
