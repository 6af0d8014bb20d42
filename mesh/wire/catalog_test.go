package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestACatalogueRoundTrips(t *testing.T) {
	c := Catalogue{Tools: []ToolInfo{
		{Module: "sensor", Tool: "calibrate", Description: "Sets the offset.", Args: json.RawMessage(`{"type":"object","properties":{"to":{"type":"number"}}}`)},
		{Module: "relay", Tool: "call", Args: AnyObject},
	}}
	got, err := ParseCatalogue(c.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != 2 || got.Tools[0].Name() != "relay.call" || got.Tools[1].Description != "Sets the offset." {
		t.Fatalf("expected the tools sorted by name with their fields, got %+v", got.Tools)
	}
	if string((Catalogue{}).Marshal()) != `{"tools":[]}` {
		t.Errorf("an empty catalogue: got %s", (Catalogue{}).Marshal())
	}
}

func TestABadCatalogueIsRefusedNamingWhat(t *testing.T) {
	for doc, want := range map[string]string{
		`[]`:                    "cannot unmarshal",
		`{}`:                    "no tools list",
		`{"tools":[],"more":1}`: "unknown field",
		`{"tools":[]} {}`:       "more than one",
		`{"tools":[{"module":"Sensor","tool":"x","args":{"type":"object"}}]}`:                                               "module",
		`{"tools":[{"module":"sensor","tool":"a.b","args":{"type":"object"}}]}`:                                             "tool",
		`{"tools":[{"module":"sensor","tool":"x","args":{"type":"string"}}]}`:                                               "an object",
		`{"tools":[{"module":"sensor","tool":"x"}]}`:                                                                        "not a JSON object schema",
		`{"tools":[{"module":"b","tool":"x","args":{"type":"object"}},{"module":"a","tool":"x","args":{"type":"object"}}]}`: "sorted",
	} {
		_, err := ParseCatalogue([]byte(doc))
		if !errors.Is(err, ErrCatalogue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: expected a refusal saying %q, got %v", doc, want, err)
		}
	}
}

func TestASealedCredentialIsReadStrictly(t *testing.T) {
	s := SealedCredential{Person: "alice", Sealed: []byte{1, 2, 3}}
	got, err := ParseSealedCredential(s.Marshal())
	if err != nil || got.Person != "alice" || string(got.Sealed) != "\x01\x02\x03" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, doc := range []string{`{"person":"alice"}`, `{"person":"","sealed":"AQ=="}`, `{"person":"alice","sealed":"AQ==","x":1}`, `{"url":"tls://x"}`} {
		if _, err := ParseSealedCredential([]byte(doc)); !errors.Is(err, ErrSealedCredential) {
			t.Errorf("%s: expected ErrSealedCredential, got %v", doc, err)
		}
	}
}
