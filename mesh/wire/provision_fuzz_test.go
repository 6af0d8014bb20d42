package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseContributions: whatever the file, ParseContributions never
// panics, refuses only with ErrBadContributions and never shows a secret;
// every entry it accepts names a consumer wholly (as and node, each a
// name), no consumer twice, values a compact JSON object; and what it
// accepts, written back, reads the same. Seeds: testdata/fuzz/.
func FuzzParseContributions(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseContributions(data)
		if err != nil {
			if !errors.Is(err, ErrBadContributions) {
				t.Fatalf("refused without ErrBadContributions: %v", err)
			}
			for _, secret := range secretsIn(data) {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the refusal shows the secret %q: %v", secret, err)
				}
			}
			return
		}
		seen := map[[2]string]bool{}
		for i, c := range got {
			if CheckName(c.As) != nil || CheckName(c.Node) != nil {
				t.Fatalf("entries[%d]: accepted as %q node %q", i, c.As, c.Node)
			}
			if seen[[2]string{c.As, c.Node}] {
				t.Fatalf("entries[%d]: consumer %s on %s accepted twice", i, c.As, c.Node)
			}
			seen[[2]string{c.As, c.Node}] = true
			if c.Values != nil {
				var buf bytes.Buffer
				if !json.Valid(c.Values) || c.Values[0] != '{' || json.Compact(&buf, c.Values) != nil || !bytes.Equal(buf.Bytes(), c.Values) {
					t.Fatalf("entries[%d]: values not a compact object: %s", i, c.Values)
				}
			}
		}
		written, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("accepted entries do not marshal: %v", err)
		}
		again, err := ParseContributions(written)
		if err != nil {
			t.Fatalf("accepted entries, written back, are refused: %v\n%s", err, written)
		}
		if len(again) != len(got) {
			t.Fatalf("round trip: %d entries, then %d", len(got), len(again))
		}
		for i := range got {
			a, b := got[i], again[i]
			if a.As != b.As || a.Node != b.Node || a.Secret != b.Secret || !a.At.Equal(b.At) || !bytes.Equal(a.Values, b.Values) {
				t.Fatalf("round trip of entries[%d]: %+v, then %+v", i, a, b)
			}
		}
	})
}

// secretsIn are the secrets a contributions file carries (any JSON value
// under "secret", as written and, for a string, decoded), those long
// enough and found once only in data to be told apart in an error.
func secretsIn(data []byte) []string {
	var entries []map[string]json.RawMessage
	if json.Unmarshal(data, &entries) != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		raw, ok := e[ContributionSecret]
		if !ok {
			continue
		}
		cands := []string{strings.TrimSpace(string(raw))}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			cands = append(cands, s)
		}
		for _, c := range cands {
			if len(c) >= 6 && bytes.Count(data, []byte(c)) == 1 {
				out = append(out, c)
			}
		}
	}
	return out
}
