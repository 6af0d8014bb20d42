package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "node-a", "sensor2", strings.Repeat("a", 32)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "1a", "a.b", "a_b", "a*", "a>", "a b", strings.Repeat("a", 33)} {
		if err := CheckName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckName(%q): expected ErrBadName, got %v", bad, err)
		}
	}
}

func TestKeysAndPatterns(t *testing.T) {
	if err := CheckKey("alarm.raised"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "a..b", "a.*", ".a", "A"} {
		if CheckKey(bad) == nil {
			t.Errorf("CheckKey(%q): expected a refusal", bad)
		}
	}
	for _, ok := range []string{"a", "a.*", "*.b", "a.>", ">"} {
		if err := CheckKeyPattern(ok); err != nil {
			t.Errorf("CheckKeyPattern(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"a.>.b", "a.b*", ""} {
		if CheckKeyPattern(bad) == nil {
			t.Errorf("CheckKeyPattern(%q): expected a refusal", bad)
		}
	}
	if CheckToolName("a.b") == nil {
		t.Error("expected a dotted tool name to be refused")
	}
}

func TestMatchKey(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"reading", "reading", true},
		{"reading", "readings", false},
		{"alarm.*", "alarm.raised", true},
		{"alarm.*", "alarm.raised.twice", false},
		{"alarm.>", "alarm.raised.twice", true},
		{"alarm.>", "alarm", false},
		{"*", "alarm.raised", false},
		{">", "alarm.raised", true},
	}
	for _, c := range cases {
		if got := MatchKey(c.pattern, c.key); got != c.want {
			t.Errorf("MatchKey(%q, %q): expected %v, got %v", c.pattern, c.key, c.want, got)
		}
	}
}

const fp = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseCredential(t *testing.T) {
	doc := `{"url":"tls://mod.node-a.sensor:pw@nats:4222","fingerprint":"` + fp + `","node":"node-a","module":"sensor"}`
	c, err := ParseCredential([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.User() != "mod.node-a.sensor" || c.Host() != "nats" || c.Inbox() != "_INBOX.sensor.node-a" || c.Bootstrap {
		t.Fatalf("unexpected reading: %+v user=%s host=%s inbox=%s", c, c.User(), c.Host(), c.Inbox())
	}
	again, err := ParseCredential(c.Marshal())
	if err != nil || again != c {
		t.Fatalf("round trip: %+v, %v", again, err)
	}

	boot, err := ParseCredential([]byte("tls://nats:4222\n"))
	if err != nil || !boot.Bootstrap {
		t.Fatalf("expected a bootstrap credential, got %+v, %v", boot, err)
	}

	refusals := map[string]string{
		`{"fingerprint":"` + fp + `","node":"a","module":"b"}`:                        "field url is missing",
		`{"url":"tls://u:p@h:1","node":"a","module":"b"}`:                             "field fingerprint is missing",
		`{"url":"tls://u:p@h:1","fingerprint":"abc","node":"a","module":"b"}`:         "field fingerprint:",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","module":"b"}`:             "field node is missing",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","node":"a"}`:               "field module is missing",
		`{"url":"http://u:p@h:1","fingerprint":"` + fp + `","node":"a","module":"b"}`: "field url:",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","node":"a","module":"B"}`:  "field module:",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","node":"a","extra":1}`:     "unknown field",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","principal":"wizard"}`:     "field principal",
		`{"url":"tls://u:p@h:1","fingerprint":"` + fp + `","principal":"person"}`:     "field name is missing",
		`not a url`: "bootstrap url",
		``:          "empty",
	}
	for in, want := range refusals {
		_, err := ParseCredential([]byte(in))
		if !errors.Is(err, ErrBadCredential) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCredential(%s): expected ErrBadCredential naming %q, got %v", in, want, err)
		}
	}
}
