package wire

import (
	"errors"
	"fmt"
	"reflect"
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
	if err != nil || !reflect.DeepEqual(again, c) {
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

func credDoc(url, extra string) string {
	return `{"url":"` + url + `","fingerprint":"` + fp + `"` + extra + `}`
}

// TestParseCredentialRefusesWhatItCannotTrust: bad input is refused with
// the field named, never taken as something else.
func TestParseCredentialRefusesWhatItCannotTrust(t *testing.T) {
	mod := `,"node":"node-a","module":"sensor"`
	ok := credDoc("tls://mod.node-a.sensor:pw@nats:4222", mod)
	refusals := map[string]string{
		ok + `{"url":"x"}`:                                    "trailing data after the JSON document at byte",
		ok + "\n}":                                            "trailing data",
		ok + " garbage":                                       "trailing data",
		`"tls://nats:4222" x`:                                 "bootstrap url",
		credDoc("tls://nats:4222", mod):                       "field url: tls://nats:4222: no user",
		credDoc("tls://:pw@nats:4222", mod):                   "no user",
		credDoc("tls://mod.node-a.sensor@nats:4222", mod):     "no password",
		credDoc("tls://mod.node-a.sensor:@nats:4222", mod):    "no password",
		credDoc("tls://mod.node-a.sensor:pw@:4222", mod):      "no host",
		credDoc("tls://mod.node-a.sensor:pw@", mod):           "no host",
		credDoc("tls://mod.node-a.sensor:pw@nats:", mod):      "empty port",
		credDoc("tls://mod.node-a.sensor:pw@nats:0", mod):     "port 0 out of range",
		credDoc("tls://mod.node-a.sensor:pw@nats:65536", mod): "port 65536 out of range",
		credDoc("mod.node-a.sensor:pw@nats:4222", mod):        "no scheme:// found",
		// Plain TCP has no certificate for the pin to check: the URL is
		// named, its password not.
		credDoc("amqp://mod.node-a.sensor:pw@rabbitmq:5672/mesh", mod): "field url: amqp://mod.node-a.sensor:xxxxx@rabbitmq:5672/mesh: scheme amqp is plain TCP",
		// The user is the identity's, and nobody else's.
		credDoc("tls://mod.node-a.logger:pw@nats:4222", mod): `field url: user "mod.node-a.logger" is not module "sensor" on node "node-a" (want "mod.node-a.sensor")`,
		credDoc("tls://mod.node-b.sensor:pw@nats:4222", mod): `want "mod.node-a.sensor"`,
		credDoc("tls://host.node-b:pw@nats:4222", `,"principal":"host","node":"node-a","declaration_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="`): `is not the host of node "node-a" (want "host.node-a")`,
		credDoc("tls://person.bob:pw@nats:4222", `,"principal":"person","name":"alice"`):                                                                  `want "person.alice"`,
		credDoc("tls://enrol.t2:pw@nats:4222", `,"principal":"enrol","name":"t1"`):                                                                        `want "enrol.t1"`,
		credDoc("tls://mod.a.b:pw@nats:4222", `,"principal":"controller"`):                                                                                `is not the controller (want a user beginning with "controller")`,
	}
	for in, want := range refusals {
		_, err := ParseCredential([]byte(in))
		if !errors.Is(err, ErrBadCredential) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCredential(%s): expected ErrBadCredential naming %q, got %v", in, want, err)
		}
	}

	accepted := map[string]string{
		credDoc("tls://host.node-a:pw@nats:4222", `,"principal":"host","node":"node-a","declaration_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="`): "host.node-a",
		credDoc("tls://person.alice:pw@nats:4222", `,"principal":"person","name":"alice"`):                                                                "person.alice",
		credDoc("tls://enrol.t1:pw@nats:4222", `,"principal":"enrol","name":"t1"`):                                                                        "enrol.t1",
		credDoc("tls://controller:pw@nats:4222", `,"principal":"controller"`):                                                                             "controller",
		// The controller may have a user per account it works in.
		credDoc("tls://controller.mesh:pw@nats:4222", `,"principal":"controller"`): "controller.mesh",
		credDoc("tls://mod.node-a.sensor:pw@[::1]:4222", mod):                      "mod.node-a.sensor",
		credDoc("tls://mod.node-a.sensor:pw@nats", mod):                            "mod.node-a.sensor",
		credDoc("amqps://mod.node-a.sensor:pw@nats:5671/mesh", mod):                "mod.node-a.sensor",
		"amqp://nats:5672": "",
		ok + "\n\n":        "mod.node-a.sensor",
		"\n " + ok:         "mod.node-a.sensor",
	}
	for in, user := range accepted {
		c, err := ParseCredential([]byte(in))
		if err != nil || c.User() != user {
			t.Errorf("ParseCredential(%s): expected user %s, got %q, %v", in, user, c.User(), err)
		}
	}
}

// TestCredentialErrorsNeverCarryThePassword: a module logs the error it
// could not read its credential with; url.Parse's own errors echo the
// whole URL, password included.
func TestCredentialErrorsNeverCarryThePassword(t *testing.T) {
	const pw = "s3cret-PW-9f2"
	mod := `,"node":"node-a","module":"sensor"`
	urls := []string{
		"tls://mod.node-a.sensor:" + pw + "@nats:bad",
		"tls://mod.node-a.sensor:" + pw + "@nats:99999",
		"tls://mod.node-a.sensor:" + pw + "@nats:4222/%zz",
		"tls://mod.node-a.sensor:" + pw + "%zz@nats:4222",
		"tls://mod.node-a.sensor:" + pw + "^@nats:4222",
		"tls://mod.node-a.sensor:" + pw + "@[::1:4222",
		"tls://mod.node-a.sensor:" + pw + "@na ts:4222",
		"http://mod.node-a.sensor:" + pw + "@nats:4222",
		"tls://mod.node-a.sensor:" + pw + "@:4222",
		"tls://mod.node-a.logger:" + pw + "@nats:4222",
		"tls:/mod.node-a.sensor:" + pw + "@nats:4222",
		"mod.node-a.sensor:" + pw + "@nats:4222",
		"tls://mod.node-a.sensor:" + pw + "@nats:4222\x7f",
	}
	for _, u := range urls {
		for _, in := range []string{credDoc(u, mod), u} {
			_, err := ParseCredential([]byte(in))
			if err == nil {
				if in != u { // a bootstrap URL has no identity to disagree with
					t.Errorf("ParseCredential(%q): expected a refusal", in)
				}
				continue
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("ParseCredential(%q): the error carries the password: %v", in, err)
			}
		}
		c := Credential{URL: u, Fingerprint: fp, Node: "node-a", Module: "sensor"}
		if err := c.ValidateFields(); err != nil && strings.Contains(err.Error(), pw) {
			t.Errorf("ValidateFields(%q): the error carries the password: %v", u, err)
		}
		if r := RedactURL(u); strings.Contains(r, pw) {
			t.Errorf("RedactURL(%q) = %q: carries the password", u, r)
		}
	}
	_, err := ParseCredential([]byte(credDoc("tls://mod.node-a.sensor:"+pw+"@nats:bad", mod)))
	if want := `field url: tls://mod.node-a.sensor:xxxxx@nats:bad: invalid port ":bad" after host`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("expected the refusal to show the redacted URL and the reason, %q; got %v", want, err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"tls://u:pw@h:1":        "tls://u:xxxxx@h:1",
		"tls://u@h:1":           "tls://u@h:1",
		"tls://h:1":             "tls://h:1",
		"amqps://u:p@w@h:1/v?x": "amqps://u:xxxxx@h:1/v?x",
		"tls://h:1/a@b":         "tls://h:1/a@b",
		"u:pw@h:1":              "(a URL without scheme://, not shown)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A refusal's reason names its part so that it reads back from the
// server's advisory, whatever the detail says.
func TestRefusalReasonReadsBack(t *testing.T) {
	for _, c := range []struct {
		err  error
		part string
	}{
		{&HeaderError{Header: HeaderNode, Err: ErrMissingHeader}, HeaderNode},
		{&HeaderError{Header: HeaderSource, Err: ErrSourceMismatch, Detail: "x-source: provider"}, HeaderSource},
		{fmt.Errorf("decode: %w", ErrBadBody), RefusedBody},
		{ErrHeadersTooLarge, RefusedHeaders},
		{fmt.Errorf("%w: %q", ErrNotEventSubject, "mesh.seat.broker.event.up"), RefusedSubject},
		{ErrNotEnvelope, RefusedEnvelope},
	} {
		reason := RefusalReason(c.err)
		if got, ok := ParseRefusalReason(reason); !ok || got != c.part {
			t.Errorf("%q: expected the part %q, got %q (%v)", reason, c.part, got, ok)
		}
	}
	for _, reason := range []string{"", "the driver was told to fail", "envelope refused: ", "envelope refused: no part"} {
		if part, ok := ParseRefusalReason(reason); ok {
			t.Errorf("%q: expected no refusal's part, got %q", reason, part)
		}
	}
	if got := TerminatedAdvisory("node-b_consumer"); got != "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.EVENTS.node-b_consumer" {
		t.Errorf("unexpected advisory subject %s", got)
	}
}

func TestAPersonsToolsAreChecked(t *testing.T) {
	base := Credential{URL: "tls://person.alice:pw@nats:4222", Fingerprint: strings.Repeat("a", 64), Principal: PrincipalPerson, Name: "alice"}
	for _, tools := range [][]string{nil, {"*"}, {"sensor.calibrate", "mesh-catalog.catalog_tools"}} {
		c := base
		c.Tools = tools
		if err := c.Validate(); err != nil {
			t.Errorf("tools %q: %v", tools, err)
		}
	}
	for _, tools := range [][]string{{"*", "sensor.calibrate"}, {"sensor"}, {"Sensor.calibrate"}, {"sensor.calibrate", "sensor.calibrate"}} {
		c := base
		c.Tools = tools
		if err := c.Validate(); !errors.Is(err, ErrBadCredential) || !strings.Contains(err.Error(), "tools") {
			t.Errorf("tools %q: expected a refusal naming the field tools, got %v", tools, err)
		}
	}
	mod := Credential{URL: "tls://mod.node-a.sensor:pw@nats:4222", Fingerprint: strings.Repeat("a", 64), Node: "node-a", Module: "sensor", Tools: []string{"*"}}
	if err := mod.Validate(); !errors.Is(err, ErrBadCredential) {
		t.Errorf("a module's credential listing tools: expected a refusal, got %v", err)
	}
	admin := base
	admin.Tools = []string{"*"}
	alice := base
	alice.Tools = []string{"sensor.calibrate"}
	if !admin.MayCall("relay", "call") || !alice.MayCall("sensor", "calibrate") || alice.MayCall("relay", "call") {
		t.Error("MayCall disagrees with the tools listed")
	}
}
