package wire

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAMQPNames(t *testing.T) {
	for got, want := range map[string]string{
		EventRoutingKey("sensor", "alarm.raised"):               "sensor.alarm.raised",
		EventsQueue("node-b", "logger"):                         "node-b.logger.events",
		ServiceQueue("catalog", "catalog_tools"):                "serve.catalog.catalog_tools",
		AMQPUser("node-a", "sensor"):                            ModuleUser("node-a", "sensor"),
		AMQPBusURL("mod.node-a.sensor", "p w", "rabbitmq:5671"): "amqps://mod.node-a.sensor:p%20w@rabbitmq:5671/mesh",
	} {
		if got != want {
			t.Errorf("expected %q, got %q", want, got)
		}
	}
}

func TestAMQPBusURLIsACredentialURL(t *testing.T) {
	c := Credential{URL: AMQPBusURL("mod.node-a.sensor", "pw", "rabbitmq:5671"), Fingerprint: strings.Repeat("ab", 32), Node: "node-a", Module: "sensor"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.User() != "mod.node-a.sensor" || c.Host() != "rabbitmq" {
		t.Fatalf("expected user mod.node-a.sensor at rabbitmq, got %q at %q", c.User(), c.Host())
	}
}

func TestEventKeyFromRoutingKey(t *testing.T) {
	module, key, err := EventKeyFromRoutingKey("sensor.alarm.raised")
	if err != nil || module != "sensor" || key != "alarm.raised" {
		t.Fatalf("expected sensor and alarm.raised, got %q %q %v", module, key, err)
	}
	for _, bad := range []string{"", "sensor", "sensor.", ".reading", "Sensor.reading", "sensor.a..b", "serve.x.y.*"} {
		if _, _, err := EventKeyFromRoutingKey(bad); !errors.Is(err, ErrNotEventRoutingKey) {
			t.Errorf("%q: expected ErrNotEventRoutingKey, got %v", bad, err)
		}
	}
}

func TestEventBindingKey(t *testing.T) {
	for pattern, want := range map[string]string{
		"sensor.reading":   "sensor.reading",
		"sensor.alarm.>":   "sensor.alarm.*.#",
		"sensor.>":         "sensor.*.#",
		"sensor.*.raised":  "sensor.*.raised",
		"sensor.*":         "sensor.*",
		"sensor.alarm.x>":  "sensor.alarm.x>", // not a wildcard token: left as it is (never valid)
		"sensor.*.alarm.>": "sensor.*.alarm.*.#",
	} {
		if got := EventBindingKey(pattern); got != want {
			t.Errorf("%q: expected %q, got %q", pattern, want, got)
		}
	}
}

// topicMatch is RabbitMQ's topic routing, written from its documentation
// and independently of EventBindingKey: '*' is exactly one word, '#' is
// zero or more.
func topicMatch(binding, key string) bool {
	var match func(b, k []string) bool
	match = func(b, k []string) bool {
		if len(b) == 0 {
			return len(k) == 0
		}
		switch b[0] {
		case "#":
			for i := 0; i <= len(k); i++ {
				if match(b[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			return len(k) > 0 && match(b[1:], k[1:])
		}
		return len(k) > 0 && b[0] == k[0] && match(b[1:], k[1:])
	}
	return match(strings.Split(binding, "."), strings.Split(key, "."))
}

// The two buses deliver the same events for the same manifest: a binding
// key routes exactly the routing keys MatchKey says its pattern matches.
func TestEventBindingKeyRoutesLikeMatchKey(t *testing.T) {
	patterns := []string{"sensor.reading", "sensor.alarm.>", "sensor.>", "sensor.*", "sensor.*.raised", "sensor.alarm.*", "sensor.*.>"}
	keys := []string{"reading", "alarm", "alarm.raised", "alarm.raised.twice", "reading.raised", "other.raised"}
	for _, p := range patterns {
		for _, k := range keys {
			rk := EventRoutingKey("sensor", k)
			if got, want := topicMatch(EventBindingKey(p), rk), MatchKey(p, rk); got != want {
				t.Errorf("pattern %q (binding %q), key %q: routed %v, MatchKey says %v", p, EventBindingKey(p), rk, got, want)
			}
		}
		if topicMatch(EventBindingKey(p), EventRoutingKey("other", "reading")) {
			t.Errorf("pattern %q routes another module's event", p)
		}
	}
	// The plain '#' the mapping avoids would differ: it also routes "alarm".
	if !topicMatch("sensor.alarm.#", "sensor.alarm") || MatchKey("sensor.alarm.>", "sensor.alarm") {
		t.Fatal("expected '#' to match zero words where '>' does not (the reason for '*.#')")
	}
}

func TestDeliveryLimit(t *testing.T) {
	for maxDeliver, want := range map[int]int{5: 4, 3: 2, 1: 0, 0: 0} {
		if got := DeliveryLimit(maxDeliver); got != want {
			t.Errorf("DeliveryLimit(%d): expected %d, got %d", maxDeliver, want, got)
		}
	}
}

func TestCallExpiration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "1500",
		10 * time.Second:        "10000",
		time.Microsecond:        "1",
		0:                       "1",
		-time.Second:            "1",
	} {
		if got := CallExpiration(d); got != want {
			t.Errorf("CallExpiration(%s): expected %q, got %q", d, want, got)
		}
		if CallExpiration(d) == CallExpirationProbe {
			t.Errorf("CallExpiration(%s) is the probe's expiration", d)
		}
	}
}

func TestHeadersThroughAnAMQPTable(t *testing.T) {
	h := map[string][]string{
		HeaderEventID: {"id-1"}, HeaderSource: {"sensor"}, HeaderNode: {"node-a"},
		HeaderTime: {"2026-09-16T10:00:00.000Z"}, HeaderContentType: {ContentTypeJSON},
		HeaderSchema: {"2"}, "x-trace": {"4bf92f3577b34da6"},
	}
	tbl := HeadersToTable(h)
	if len(tbl) != len(h) || tbl[HeaderEventID] != "id-1" {
		t.Fatalf("expected every header as one string, got %v", tbl)
	}
	back := HeadersFromTable(tbl, "")
	if !maps.EqualFunc(back, h, slices.Equal) {
		t.Fatalf("expected the headers back unchanged, got %v", back)
	}
	if err := ValidateHeaders(back); err != nil {
		t.Fatalf("expected the envelope valid after the round trip: %v", err)
	}
	if HeadersToTable(nil) != nil {
		t.Fatal("expected no table for no headers")
	}

	// What the broker adds: a count is written out, x-death is no header.
	got := HeadersFromTable(map[string]any{
		"x-delivery-count": int64(2), "x-flag": true, "x-raw": []byte("b"),
		"x-death": []any{map[string]any{"reason": "rejected"}},
	}, "")
	want := map[string][]string{"x-delivery-count": {"2"}, "x-flag": {"true"}, "x-raw": {"b"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("expected %v, got %v", want, got)
	}
}

// content-type has its own AMQP property: read when the headers lack it,
// never over the header.
func TestContentTypeFromTheProperty(t *testing.T) {
	if got := HeadersFromTable(map[string]any{}, ContentTypeJSON)[HeaderContentType]; !slices.Equal(got, []string{ContentTypeJSON}) {
		t.Fatalf("expected the property read, got %v", got)
	}
	got := HeadersFromTable(map[string]any{HeaderContentType: "text/plain"}, ContentTypeJSON)[HeaderContentType]
	if !slices.Equal(got, []string{"text/plain"}) {
		t.Fatalf("expected the header to win, got %v", got)
	}
	if _, ok := HeadersFromTable(map[string]any{}, "")[HeaderContentType]; ok {
		t.Fatal("expected no content-type when neither carries one")
	}
}

func TestAMQPControlNames(t *testing.T) {
	for got, want := range map[string]string{
		NodeQueue("node-a"): "node.node-a",
		EnrolQueue("tok-1"): "enrol.tok-1",
		AMQPControlURL("host.node-a", "pw", "rabbitmq:5671"): "amqps://host.node-a:pw@rabbitmq:5671/control",
	} {
		if got != want {
			t.Errorf("expected %q, got %q", want, got)
		}
	}
	// Each control subject has its own queue, named by the subject
	// without "mesh.": two subjects never share one.
	seen := map[string]string{}
	for _, subject := range []string{
		SubjectEnrol, SubjectBuilt, SubjectPush,
		NodeReport("node-a"), NodeAlive("node-a"), NodeCredentials("node-a"),
		NodeReport("node-b"), SourceChanged("modules"),
	} {
		q, err := ControlQueue(subject)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if q != strings.TrimPrefix(subject, "mesh.") {
			t.Errorf("%s: expected its queue named by the subject, got %q", subject, q)
		}
		if other, ok := seen[q]; ok {
			t.Errorf("%s and %s share queue %s", subject, other, q)
		}
		seen[q] = subject
	}
	for _, bad := range []string{
		"", "mesh.control", "mesh.control.", "mesh.node.node-a.declare", "control.enrol",
		SubjectReports, SubjectControlAll, "mesh.control.#", "mesh.control..report", SubjectBuildRequest,
	} {
		if q, err := ControlQueue(bad); !errors.Is(err, ErrNotControlSubject) {
			t.Errorf("%q: expected ErrNotControlSubject, got %q, %v", bad, q, err)
		}
	}
}

func TestCheckEnrolQueue(t *testing.T) {
	if err := CheckEnrolQueue("tok-1", EnrolQueue("tok-1")); err != nil {
		t.Fatalf("expected the token's own queue accepted, got %v", err)
	}
	for _, reply := range []string{
		EnrolQueue("tok-2"), NodeQueue("node-a"), QueueBuilds, "control.node-a.report",
		EnrolInbox("tok-1") + ".x", DirectReplyTo, "enrol.tok-1.x", "", "enrol.",
	} {
		if err := CheckEnrolQueue("tok-1", reply); !errors.Is(err, ErrReplySubject) {
			t.Errorf("%q: expected ErrReplySubject, got %v", reply, err)
		}
	}
	if err := CheckEnrolQueue("", "enrol."); !errors.Is(err, ErrReplySubject) {
		t.Errorf("expected an empty token refused, got %v", err)
	}
}

func TestEventsQueueOwner(t *testing.T) {
	node, module, ok := EventsQueueOwner(EventsQueue("node-b", "logger"))
	if !ok || node != "node-b" || module != "logger" {
		t.Fatalf("expected node-b and logger, got %q %q %v", node, module, ok)
	}
	for _, bad := range []string{"", ".events", "node-b.events", "node-b.logger", "a.b.c.events", QueueStatus, QueueDead, ServiceQueue("sensor", "calibrate"), "Node.logger.events"} {
		if n, m, ok := EventsQueueOwner(bad); ok {
			t.Errorf("%q: expected no module's queue, got %q %q", bad, n, m)
		}
	}
}

// TestStatusRoutingKeysAreTheStatusSubjects: the status queue is bound
// with exactly the subjects the status consumer filters on NATS, and no
// module's events queue can be named like it.
func TestStatusRoutingKeysAreTheStatusSubjects(t *testing.T) {
	var want []string
	for _, s := range ProvisionerStatusEvents {
		module, key, ok := strings.Cut(strings.TrimPrefix(s, "mesh.mod."), ".event.")
		if !ok || module != "*" {
			t.Fatalf("unexpected status subject %q", s)
		}
		want = append(want, EventRoutingKey(module, key))
	}
	if got := StatusRoutingKeys(); !slices.Equal(got, want) {
		t.Fatalf("expected %v, got %v", want, got)
	}
	if _, _, ok := EventsQueueOwner(QueueStatus); ok {
		t.Fatalf("%s reads as a module's events queue", QueueStatus)
	}
}
