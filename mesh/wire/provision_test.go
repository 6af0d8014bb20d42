package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseContributions(t *testing.T) {
	data := `[
	  {"as": "billing", "node": "node-a", "secret": "s1", "at": "2026-10-06T12:00:00Z",
	   "values": { "database" : "orders" }, "later": "ignored"},
	  {"as": "ledger", "node": "node-a"},
	  {"as": "billing", "node": "node-b", "secret": null, "values": null}
	]`
	got, err := ParseContributions([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("expected 3 entries, got %d", len(got))
	}
	want0 := Contribution{As: "billing", Node: "node-a", Secret: "s1",
		At: time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC), Values: json.RawMessage(`{"database":"orders"}`)}
	if g := got[0]; g.As != want0.As || g.Node != want0.Node || g.Secret != want0.Secret ||
		!g.At.Equal(want0.At) || string(g.Values) != string(want0.Values) {
		t.Errorf("entries[0]: expected %+v, got %+v", want0, g)
	}
	if g := got[1]; g.As != "ledger" || g.Node != "node-a" || g.Secret != "" || !g.At.IsZero() || g.Values != nil {
		t.Errorf("entries[1]: expected ledger on node-a with nothing else, got %+v", g)
	}
	if g := got[2]; g.As != "billing" || g.Node != "node-b" || g.Values != nil {
		t.Errorf("entries[2]: expected billing on node-b, got %+v", g)
	}
}

// TestContributedValuesAreCanonical: a provider compares values byte for
// byte to see whether a consumer's contribution changed, so the same
// object written another way (another encoder's escapes, another key
// order, white space) reads as the same bytes.
func TestContributedValuesAreCanonical(t *testing.T) {
	got, err := ParseContributions([]byte(`[
	  {"as": "a", "node": "n", "values": {"b": [1, 2.50, {"z": true, "y": null}], "a": "x&y<\u0041>"}},
	  {"as": "b", "node": "n", "values": {"a":"x\u0026y\u003cA\u003e","b":[1,2.50,{"y":null,"z":true}]}},
	  {"as": "c", "node": "n", "values": {"a": "first", "a": "x&y<A>", "b": [1, 2.50, {"y": null, "z": true}]}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"x&y<A>","b":[1,2.50,{"y":null,"z":true}]}`
	for _, c := range got {
		if string(c.Values) != want {
			t.Errorf("%s: values %s, want %s", c.As, c.Values, want)
		}
	}
}

func TestParseContributionsEmptyArray(t *testing.T) {
	got, err := ParseContributions([]byte("[]\n"))
	if err != nil || len(got) != 0 {
		t.Fatalf("expected no entries and no error, got %v, %v", got, err)
	}
}

func TestParseContributionsRefusals(t *testing.T) {
	cases := []struct {
		name, data string
		want       []string // every fragment must appear in the error
	}{
		{"empty", "  ", []string{"empty"}},
		{"not an array", `{"as": "a", "node": "n"}`, []string{"want a JSON array"}},
		{"entry not an object", `[{"as":"a","node":"n"}, 3]`, []string{"entries[1]", "want an object"}},
		{"null entry", `[null]`, []string{"entries[0]", "want an object"}},
		{"no as", `[{"node": "node-a"}]`, []string{"entries[0]", "field as is missing"}},
		{"empty as", `[{"as": "", "node": "node-a"}]`, []string{"entries[0]", "field as is missing"}},
		{"no node", `[{"as":"a","node":"n"}, {"as": "billing"}]`, []string{`entries[1] (as "billing")`, "field node is missing"}},
		{"as not a string", `[{"as": 5, "node": "n"}]`, []string{"entries[0]", "field as: want a string"}},
		{"bad as", `[{"as": "Billing", "node": "n"}]`, []string{"entries[0]", "field as:", "lower-case"}},
		{"bad node", `[{"as": "a", "node": "node.a"}]`, []string{`(as "a")`, "field node:"}},
		{"secret not a string", `[{"as": "a", "node": "n", "secret": {}}]`, []string{"field secret: want a string, got an object"}},
		{"secret a number", `[{"as": "a", "node": "n", "secret": 98765432}]`, []string{"field secret: want a string, got a number"}},
		{"bad at", `[{"as": "a", "node": "n", "at": "yesterday"}]`, []string{`(as "a")`, "field at: want an RFC 3339 time"}},
		{"values not an object", `[{"as": "a", "node": "n", "values": [1]}]`, []string{"field values: want an object"}},
		{"duplicate", `[{"as":"a","node":"n"},{"as":"b","node":"n"},{"as":"a","node":"n"}]`,
			[]string{"entries[2]", `as "a" on node "n"`, "already entries[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseContributions([]byte(c.data))
			if !errors.Is(err, ErrBadContributions) {
				t.Fatalf("expected ErrBadContributions, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("expected the error to contain %q, got %q", w, err)
				}
			}
			if strings.Contains(err.Error(), "98765432") {
				t.Errorf("the refusal shows the secret: %v", err)
			}
		})
	}
}

func TestProvisionerNamesAreValid(t *testing.T) {
	for _, k := range ProvisionerEvents {
		if err := CheckKey(k); err != nil {
			t.Errorf("event key %q: %v", k, err)
		}
	}
	for _, tool := range ProvisionerTools {
		if err := CheckToolName(tool); err != nil {
			t.Errorf("tool %q: %v", tool, err)
		}
	}
}

func TestProvisionerBodies(t *testing.T) {
	since := time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
	b, err := json.Marshal(FailingEvent{ConsumerRef{"billing", "node-a"}, ClassUnreachable, since})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"consumer":"billing","node":"node-a","class":"unreachable","since":"2026-10-06T12:00:00Z"}`
	if string(b) != want {
		t.Errorf("expected %s, got %s", want, b)
	}
	b, _ = json.Marshal(RecoveredEvent{ConsumerRef{"billing", "node-a"}, RecoveredWithdrawn})
	want = `{"consumer":"billing","node":"node-a","reason":"withdrawn"}`
	if string(b) != want {
		t.Errorf("expected %s, got %s", want, b)
	}
	b, _ = json.Marshal(Contribution{As: "a", Node: "n"})
	want = `{"as":"a","node":"n"}`
	if string(b) != want {
		t.Errorf("expected %s, got %s", want, b)
	}
}
