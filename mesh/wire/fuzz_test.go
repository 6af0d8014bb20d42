package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Fuzz targets. Their seed corpora live in testdata/fuzz/<target>/ (and
// in the f.Add calls), so a plain go test runs every seed as a test; a
// failing input the fuzzer finds is written there too, and stays a test.
// Run one with: go test -run X -fuzz FuzzValidateEvent ./mesh/wire

// parseHeaderBlock reads a fuzzer's header block: one "name:value" a
// line, a name repeated for several values. An empty block is no headers
// at all (a PubAck's), which a nil map stands for.
func parseHeaderBlock(block string) map[string][]string {
	if block == "" {
		return nil
	}
	h := map[string][]string{}
	for line := range strings.SplitSeq(block, "\n") {
		name, value, _ := strings.Cut(line, ":")
		h[name] = append(h[name], value)
	}
	return h
}

const seedBlock = "x-event-id:0d6f1c2e-1b7a-4f3e-9a55-6c1d2e3f4a5b\nx-source:sensor\nx-node:node-a\nx-time:2026-09-16T10:00:00.000Z\ncontent-type:application/json"

// FuzzValidateEvent holds the envelope check to what every reader relies
// on: it never panics; what it accepts has one value of each envelope
// header, within its limit, x-source the subject's module, a JSON body;
// an accepted envelope is accepted again after crossing to AMQP's table
// and back (both buses read it alike); and a refusal never echoes more
// than a clip of what it refused.
func FuzzValidateEvent(f *testing.F) {
	f.Add("sensor", seedBlock, []byte(`{"celsius":21.5}`))
	f.Add("sensor", strings.Replace(seedBlock, "x-source:sensor", "x-source:catalog", 1), []byte(`not json`))
	f.Add("sensor", "", []byte(`{"stream":"EVENTS","seq":1}`))
	f.Add("sensor", "Status:100\nDescription:Idle Heartbeat", []byte(nil))
	f.Add("sensor", seedBlock+"\nx-source:catalog", []byte(`{}`))
	f.Add("sensor", seedBlock+"\nX-Source:catalog", []byte(`{}`))
	f.Add("sensor", seedBlock+"\nx-causation-id:c-1\nx-schema:2\nx-trace:abc", []byte(`[1]`))
	f.Fuzz(func(t *testing.T, source, block string, body []byte) {
		h := parseHeaderBlock(block)
		err := ValidateEvent(source, h, body)
		if again := ValidateEvent(source, h, body); (err == nil) != (again == nil) {
			t.Fatalf("not deterministic: %v, then %v", err, again)
		}
		if err != nil {
			if n := len(err.Error()); n > 600 {
				t.Fatalf("a refusal of %d bytes echoes what it refused: %.200s…", n, err)
			}
			return
		}
		if herr := ValidateHeaders(h); herr != nil {
			t.Fatalf("ValidateEvent accepted what ValidateHeaders refuses: %v", herr)
		}
		for _, name := range RequiredHeaders {
			if len(h[name]) != 1 || h[name][0] == "" {
				t.Fatalf("accepted with %s = %q", name, h[name])
			}
		}
		for _, name := range OptionalHeaders {
			if len(h[name]) > 1 {
				t.Fatalf("accepted with %d values of %s", len(h[name]), name)
			}
		}
		if HeaderValue(h, HeaderSource) != source || CheckName(source) != nil {
			t.Fatalf("accepted x-source %q on a subject of %q", HeaderValue(h, HeaderSource), source)
		}
		if CheckName(HeaderValue(h, HeaderNode)) != nil {
			t.Fatalf("accepted x-node %q", HeaderValue(h, HeaderNode))
		}
		if id := HeaderValue(h, HeaderEventID); len(id) > MaxIDBytes || visibleASCII(id) != nil {
			t.Fatalf("accepted x-event-id %q", id)
		}
		if _, err := ParseTime(HeaderValue(h, HeaderTime)); err != nil {
			t.Fatalf("accepted an x-time ParseTime refuses: %v", err)
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		total := 0
		for name, vs := range h {
			for _, v := range vs {
				if len(v) > MaxHeaderValueBytes {
					t.Fatalf("accepted %s of %d bytes", name, len(v))
				}
				total += len(name) + len(v) + 4
			}
			if lower := strings.ToLower(name); lower != name {
				if _, ok := h[lower]; ok && hasRule(lower) {
					t.Fatalf("accepted %s beside %s", name, lower)
				}
			}
		}
		if total > MaxHeaderBytes {
			t.Fatalf("accepted %d bytes of headers", total)
		}
		// Across to AMQP and back: the same envelope, the same verdict.
		back := HeadersFromTable(HeadersToTable(h), "")
		if err := ValidateEvent(source, back, body); err != nil {
			t.Fatalf("accepted on NATS, refused after AMQP's table: %v", err)
		}
	})
}

func hasRule(name string) bool {
	_, ok := headerRules[name]
	return ok
}

// FuzzMatchKey holds wire.MatchKey, which decides locally which handlers
// want a delivery, to the server's own subject matching: for every valid
// pattern and key, MatchKey agrees with server.SubjectMatchesFilter, the
// function JetStream matches a consumer's filters with — on the key alone,
// on "<module>.<key>" as the SDK matches, and on the full event subject as
// the consumer filters it. Where the server calls the strings valid
// subjects but our names would not (a token the mesh never grants), they
// must still agree. On anything else MatchKey must not panic.
func FuzzMatchKey(f *testing.F) {
	for _, c := range [][2]string{
		{"reading", "reading"}, {"alarm.*", "alarm.raised"}, {"alarm.>", "alarm.raised.twice"},
		{"alarm.>", "alarm"}, {"*", "alarm.raised"}, {">", "alarm.raised"}, {"*.raised", "alarm.raised"},
		{"a.*.c", "a.b.c"}, {"a.*.c", "a.b"}, {"a..b", "a..b"}, {"", ""}, {"a.>.b", "a.x.b"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, key string) {
		got := MatchKey(pattern, key)
		if CheckKeyPattern(pattern) == nil && CheckKey(key) == nil {
			if want := server.SubjectMatchesFilter(key, pattern); got != want {
				t.Fatalf("MatchKey(%q, %q) = %v, the server says %v", pattern, key, got, want)
			}
			if m := MatchKey("sensor."+pattern, "sensor."+key); m != got {
				t.Fatalf("MatchKey with the module prefix = %v, without %v", m, got)
			}
			if want := server.SubjectMatchesFilter(EventSubject("sensor", key), EventSubject("sensor", pattern)); got != want {
				t.Fatalf("MatchKey(%q, %q) = %v, the consumer's filter %v", pattern, key, got, want)
			}
		}
		if server.IsValidSubject(pattern) && server.IsValidPublishSubject(key) {
			if want := server.SubjectMatchesFilter(key, pattern); got != want {
				t.Fatalf("on valid subjects MatchKey(%q, %q) = %v, the server says %v", pattern, key, got, want)
			}
		}
	})
}

// FuzzEventSubject holds the two ways an event's origin is read — the
// NATS subject and the AMQP routing key — to one answer: what one accepts
// the other accepts with the same module and key, and it spells back to
// the same subject.
func FuzzEventSubject(f *testing.F) {
	for _, s := range []string{
		"mesh.mod.sensor.event.reading", "mesh.mod.sensor.event.alarm.raised", "mesh.seat.mesh-catalog.event.saved",
		"mesh.mod.sensor.tool.calibrate", "mesh.mod..event.x", "mesh.mod.a.event.", "mesh.mod.a.b.event.c",
		"mesh.mod.sensor.event.event.x", "mesh.mod.Sensor.event.reading",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		module, key, err := EventKeyFromSubject(subject)
		m2, k2, ok := EventOf(subject)
		if (err == nil) != ok || m2 != module || k2 != key {
			t.Fatalf("EventOf and EventKeyFromSubject disagree on %q", subject)
		}
		if err != nil {
			return
		}
		if EventSubject(module, key) != subject {
			t.Fatalf("%q read as %q %q, which spells %q", subject, module, key, EventSubject(module, key))
		}
		rm, rk, rerr := EventKeyFromRoutingKey(EventRoutingKey(module, key))
		if rerr != nil || rm != module || rk != key {
			t.Fatalf("%q is %s %s on NATS, and on AMQP %q %q %v", subject, module, key, rm, rk, rerr)
		}
		if !server.IsValidPublishSubject(subject) {
			t.Fatalf("accepted %q, which the server would not publish", subject)
		}
	})
}
