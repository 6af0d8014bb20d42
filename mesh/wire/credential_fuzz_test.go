package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The credential parser's fuzz targets. Their seed corpora are committed
// under testdata/fuzz/<target>/, so a plain `go test` runs every seed as a
// test; `go test -run X -fuzz FuzzParseCredential ./mesh/wire` explores.

// FuzzParseCredential: whatever the bytes, ParseCredential never panics,
// refuses only with ErrBadCredential and never with the URL's password in
// the error; what it accepts is whole (Validate), survives Marshal and
// Parse again unchanged, and its user is its principal's.
func FuzzParseCredential(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCredential(data)
		if err != nil {
			if !errors.Is(err, ErrBadCredential) {
				t.Fatalf("refused without ErrBadCredential: %v", err)
			}
			if pw := passwordIn(data); pw != "" && strings.Contains(err.Error(), pw) {
				t.Fatalf("the refusal carries the password %q: %v", pw, err)
			}
			return
		}
		if c.Host() == "" || c.HostPort() == "" {
			t.Fatalf("accepted a credential without a host: %q", RedactURL(c.URL))
		}
		if c.Bootstrap {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted, yet Validate refuses: %v", err)
		}
		if c.User() == "" || c.Password() == "" || c.Inbox() == "" {
			t.Fatalf("accepted without user, password or inbox: %+v", c.Principal)
		}
		again, err := ParseCredential(c.Marshal())
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

// FuzzCredentialURL puts a password where a URL carries one, between
// fuzzed parts, and checks that no refusal and no redaction shows it.
func FuzzCredentialURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, scheme, user, password, hostport, tail string) {
		// The password is what url.Parse would read as one: no character
		// that ends the authority or the userinfo in it or before it.
		if len(password) < 6 || strings.ContainsAny(password, "@/?#") || strings.ContainsAny(user, "@/?#:") ||
			strings.ContainsAny(hostport, "@/?#") || (tail != "" && !strings.ContainsAny(tail[:1], "/?#")) {
			return
		}
		for _, other := range []string{scheme, user, hostport, tail, "node-a", "sensor", fp} {
			if strings.Contains(other, password) {
				return
			}
		}
		u := scheme + "://" + user + ":" + password + "@" + hostport + tail
		if r := RedactURL(u); strings.Contains(r, password) {
			t.Fatalf("RedactURL(%q) = %q", u, r)
		}
		doc, err := json.Marshal(Credential{URL: u, Fingerprint: fp, Node: "node-a", Module: "sensor"})
		if err != nil {
			t.Skip()
		}
		for _, in := range [][]byte{doc, []byte(u)} {
			if _, err := ParseCredential(in); err != nil && strings.Contains(err.Error(), password) {
				t.Fatalf("ParseCredential: the refusal carries the password: %v", err)
			}
		}
		c := Credential{URL: u, Fingerprint: fp, Node: "node-a", Module: "sensor"}
		if err := c.ValidateFields(); err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("ValidateFields: the refusal carries the password: %v", err)
		}
	})
}

// passwordIn is the password of the URL a credential document (or a
// bootstrap string) carries, as url.Parse would split it, when it is long
// enough and found nowhere else in data to be told apart in an error; else
// "".
func passwordIn(data []byte) string {
	text := strings.TrimSpace(string(data))
	var raw string
	var doc struct {
		URL string `json:"url"`
	}
	switch {
	case json.Unmarshal([]byte(text), &doc) == nil && doc.URL != "":
		raw = doc.URL
	case json.Unmarshal([]byte(text), &raw) == nil:
	default:
		raw = text
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	userinfo, _, ok := splitUserinfo(rest)
	if !ok {
		return ""
	}
	_, pw, ok := strings.Cut(userinfo, ":")
	if !ok || len(pw) < 6 || strings.Count(string(data), pw) != 1 || strings.Count(raw, pw) != 1 {
		return ""
	}
	return pw
}
