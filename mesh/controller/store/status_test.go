package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

var (
	since0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	said0  = since0.Add(5 * time.Minute)
)

// word is one provisioner event as it lies in EVENTS.
type word struct {
	subject string
	header  map[string][]string
	body    []byte
}

func failingWord(provider, consumer, node, class string, said time.Time) word {
	body, _ := json.Marshal(wire.FailingEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Class: class, Since: since0})
	return statusWord(provider, wire.EventProvisionerFailing, said, body)
}

func recoveredWord(provider, consumer, node string) word {
	body, _ := json.Marshal(wire.RecoveredEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Reason: wire.RecoveredSuccess})
	return statusWord(provider, wire.EventProvisionerRecovered, said0.Add(time.Hour), body)
}

func statusWord(provider, key string, said time.Time, body []byte) word {
	return word{
		subject: wire.EventSubject(provider, key),
		header: map[string][]string{
			wire.HeaderEventID:     {"evt-" + key + "-" + said.Format("150405")},
			wire.HeaderSource:      {provider},
			wire.HeaderNode:        {"node-p"},
			wire.HeaderTime:        {wire.FormatTime(said)},
			wire.HeaderContentType: {wire.ContentTypeJSON},
		},
		body: body,
	}
}

func (w word) applyTo(t *testing.T, s *Status, seq uint64) bool {
	t.Helper()
	changed, err := s.Apply(seq, w.subject, w.header, w.body)
	if err != nil {
		t.Fatalf("apply %s at %d: %v", w.subject, seq, err)
	}
	return changed
}

func failingKeys(s Status) []string {
	var out []string
	for _, f := range s.Failing {
		out = append(out, f.Provider+"/"+f.Node+"/"+f.Consumer+":"+f.Class)
	}
	return out
}

// TestStatusKeepsTheNewestFailingWordPerProviderMachineAndConsumer is ADR
// 0224's rule: the newest word per provider, machine and consumer, named
// until it recovers.
func TestStatusKeepsTheNewestFailingWordPerProviderMachineAndConsumer(t *testing.T) {
	var s Status
	failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0).applyTo(t, &s, 1)
	failingWord("pg", "billing", "node-b", wire.ClassRefused, said0).applyTo(t, &s, 2)
	failingWord("kc", "billing", "node-a", wire.ClassSecret, said0).applyTo(t, &s, 3)
	// Fifteen minutes on, the same failure said again with another class.
	later := said0.Add(15 * time.Minute)
	if !failingWord("pg", "billing", "node-a", wire.ClassTimeout, later).applyTo(t, &s, 4) {
		t.Fatal("a newer failing word reported no change")
	}
	want := []string{"kc/node-a/billing:secret", "pg/node-a/billing:timeout", "pg/node-b/billing:refused"}
	if got := failingKeys(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("failing = %v, want %v", got, want)
	}
	f := s.Failing[1]
	if !f.Said.Equal(later) || !f.Since.Equal(since0) || f.ReportedBy != "node-p" || f.EventID == "" {
		t.Fatalf("newest word not kept whole: %+v", f)
	}
	// The provider is the subject's module, which the server lets nobody
	// else publish on: an x-source that says otherwise is refused (design
	// 19: it cannot disagree with where the message arrived from), and its
	// sequence passed.
	liar := failingWord("pg", "orders", "node-a", wire.ClassInvalid, later)
	liar.header[wire.HeaderSource] = []string{"kc"}
	if _, err := s.Apply(5, liar.subject, liar.header, liar.body); !errors.Is(err, ErrBadStatusEvent) || !errors.Is(err, wire.ErrSourceMismatch) {
		t.Fatalf("expected a spoofed x-source refused with ErrSourceMismatch, got %v", err)
	}
	if s.Through != 5 || len(s.Failing) != 3 {
		t.Fatalf("a refused word changed the status: through %d, failing %v", s.Through, failingKeys(s))
	}
	failingWord("pg", "orders", "node-a", wire.ClassInvalid, later).applyTo(t, &s, 6)

	if !recoveredWord("pg", "billing", "node-a").applyTo(t, &s, 7) {
		t.Fatal("recovered reported no change")
	}
	if recoveredWord("pg", "nobody", "node-a").applyTo(t, &s, 8) {
		t.Fatal("recovering a consumer that was not failing reported a change")
	}
	want = []string{"kc/node-a/billing:secret", "pg/node-a/orders:invalid", "pg/node-b/billing:refused"}
	if got := failingKeys(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("after recovered: failing = %v, want %v", got, want)
	}
	if s.Through != 8 {
		t.Fatalf("through = %d, want 8", s.Through)
	}
}

// TestStatusNeverAppliesARedeliveryTwice: an event at or below Through was
// applied before the controller stopped, and must not undo what came after
// it.
func TestStatusNeverAppliesARedeliveryTwice(t *testing.T) {
	var s Status
	fail := failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0)
	fail.applyTo(t, &s, 10)
	recoveredWord("pg", "billing", "node-a").applyTo(t, &s, 11)
	if fail.applyTo(t, &s, 10) || len(s.Failing) != 0 || s.Through != 11 {
		t.Fatalf("a redelivery was applied: %+v", s)
	}
}

// TestStatusRefusesWhatItCannotReadAndPassesIt: a refusal names what was
// wrong, and the event's sequence is passed all the same, so it is not
// read again forever.
func TestStatusRefusesWhatItCannotReadAndPassesIt(t *testing.T) {
	good := failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0)
	noHeader := failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0)
	delete(noHeader.header, wire.HeaderNode)
	cases := []struct {
		name string
		w    word
		want string
	}{
		{"missing header", noHeader, wire.HeaderNode},
		{"not JSON", word{good.subject, good.header, []byte("{")}, "body"},
		{"no node", word{good.subject, good.header, []byte(`{"consumer":"billing","class":"refused","since":"2026-11-01T10:00:00Z"}`)}, "node"},
		{"no class", word{good.subject, good.header, []byte(`{"consumer":"billing","node":"node-a","since":"2026-11-01T10:00:00Z"}`)}, "class"},
		{"another key", statusWord("pg", wire.EventProvisionerRetirement, said0, []byte(`{}`)), wire.EventProvisionerRetirement},
		{"not an event subject", word{"mesh.node.a.declare", good.header, good.body}, "mesh.node.a.declare"},
		{"a provider that is no name", statusWord("0", wire.EventProvisionerFailing, said0, good.body), "is not a module's event subject"},
		{"a class nobody spelled", failingWord("pg", "billing", "node-a", "exploded", said0), `class "exploded" is not one of unreachable, refused, secret, invalid, timeout, unknown`},
		{"a node that is no name", withHeader(good, wire.HeaderNode, "Node B"), wire.HeaderNode},
		{"an event id without end", withHeader(good, wire.HeaderEventID, strings.Repeat("e", 129)), "x-event-id: 129 bytes, over the limit of 128"},
		{"an event id that is not text", withHeader(good, wire.HeaderEventID, "evt-\xff"), wire.HeaderEventID},
		{"a consumer that is no name", word{good.subject, good.header, []byte(`{"consumer":"` + strings.Repeat("b", 33) + `","node":"node-a","class":"refused","since":"2026-11-01T10:00:00Z"}`)}, "consumer"},
		{"no envelope at all (a PubAck)", word{good.subject, nil, []byte(`{"stream":"EVENTS","seq":1}`)}, "not an event's envelope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Status{Through: 3}
			changed, err := s.Apply(4, c.w.subject, c.w.header, c.w.body)
			if !errors.Is(err, ErrBadStatusEvent) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("expected ErrBadStatusEvent naming %q, got %v", c.want, err)
			}
			if changed || len(s.Failing) != 0 || s.Through != 4 {
				t.Fatalf("refused event changed the status or was not passed: %+v", s)
			}
		})
	}
}

// TestStatusReadsTheFixtures: the words of features/fixtures, as they lie
// on the wire, are what the status is folded from.
func TestStatusReadsTheFixtures(t *testing.T) {
	read := func(name string) word {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "features", "fixtures", name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Wire struct {
				Subject string            `json:"subject"`
				Headers map[string]string `json:"headers"`
				Body    string            `json:"body"`
			} `json:"wire"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h := map[string][]string{}
		for k, v := range f.Wire.Headers {
			h[k] = []string{v}
		}
		return word{f.Wire.Subject, h, []byte(f.Wire.Body)}
	}
	var s Status
	read("provisioner-failing.json").applyTo(t, &s, 1)
	if got := failingKeys(s); !reflect.DeepEqual(got, []string{"provider/node-b/consumer:unreachable"}) {
		t.Fatalf("after provisioner-failing.json: %v", got)
	}
	if f := s.Failing[0]; f.Since.Format(time.RFC3339) != "2026-09-26T10:00:00Z" || f.ReportedBy != "node-a" || f.EventID != "evt-0100-provisioner-failing" {
		t.Fatalf("after provisioner-failing.json: %+v", f)
	}
	read("provisioner-recovered.json").applyTo(t, &s, 2)
	if len(s.Failing) != 0 {
		t.Fatalf("after provisioner-recovered.json: %v", failingKeys(s))
	}
}

func withHeader(w word, name, value string) word {
	h := map[string][]string{}
	for k, v := range w.header {
		h[k] = v
	}
	h[name] = []string{value}
	return word{w.subject, h, w.body}
}

// TestStatusIsBounded: a provider names at most MaxFailingPerProvider
// consumers at once; past it a new one is refused and nothing held is
// lost, a held one is still updated and recovered, and other providers
// are not hindered.
func TestStatusIsBounded(t *testing.T) {
	var s Status
	seq := uint64(0)
	next := func() uint64 { seq++; return seq }
	for i := range MaxFailingPerProvider {
		failingWord("pg", fmt.Sprintf("c%d", i), "node-a", wire.ClassUnreachable, said0).applyTo(t, &s, next())
	}
	over := failingWord("pg", "one-more", "node-a", wire.ClassUnreachable, said0)
	if changed, err := s.Apply(next(), over.subject, over.header, over.body); !errors.Is(err, ErrBadStatusEvent) || changed ||
		!strings.Contains(err.Error(), fmt.Sprintf(`provider "pg" already names %d consumers failing`, MaxFailingPerProvider)) {
		t.Fatalf("expected the consumer past the bound refused, got %v (changed %v)", err, changed)
	}
	if len(s.Failing) != MaxFailingPerProvider || s.Through != seq {
		t.Fatalf("a refusal lost what was held or was not passed: %d held, through %d", len(s.Failing), s.Through)
	}
	if !failingWord("pg", "c7", "node-a", wire.ClassTimeout, said0.Add(time.Hour)).applyTo(t, &s, next()) {
		t.Fatal("a held consumer's newer word was not taken at the bound")
	}
	failingWord("kc", "one-more", "node-a", wire.ClassSecret, said0).applyTo(t, &s, next())
	recoveredWord("pg", "c0", "node-a").applyTo(t, &s, next())
	over.applyTo(t, &s, next())
	if len(s.Failing) != MaxFailingPerProvider+1 {
		t.Fatalf("expected pg at its bound and kc beside it, got %d held", len(s.Failing))
	}
}

// TestStatusRebase: a status folded from another EVENTS (deleted and
// created again, so numbered from 1 again) starts Through again and keeps
// what it names failing; the same stream changes nothing.
func TestStatusRebase(t *testing.T) {
	created1 := since0.Add(-time.Hour)
	created2 := since0.Add(time.Hour)

	var s Status
	if changed, why := s.Rebase(created1, 0); !changed || why != "" || !s.EventsCreated.Equal(created1) {
		t.Fatalf("a first look at EVENTS: changed %v, why %q, %+v", changed, why, s)
	}
	failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0).applyTo(t, &s, 10)
	if changed, why := s.Rebase(created1, 12); changed || why != "" || s.Through != 10 {
		t.Fatalf("the same stream: changed %v, why %q, through %d", changed, why, s.Through)
	}
	changed, why := s.Rebase(created2, 12)
	if !changed || s.Through != 0 || !strings.Contains(why, "EVENTS was created at") || !s.EventsCreated.Equal(created2) {
		t.Fatalf("a recreated stream: changed %v, why %q, %+v", changed, why, s)
	}
	if len(s.Failing) != 1 {
		t.Fatalf("a recreated stream lost what is failing: %v", failingKeys(s))
	}
	if !failingWord("pg", "billing", "node-b", wire.ClassRefused, said0).applyTo(t, &s, 1) {
		t.Fatal("the recreated stream's first event was taken for a redelivery")
	}

	// A status file from before EventsCreated was kept: the sequence says it.
	old := Status{Through: 40}
	changed, why = old.Rebase(created1, 3)
	if !changed || old.Through != 0 || !strings.Contains(why, "EVENTS ends at sequence 3, below the status's through 40") {
		t.Fatalf("a stream ending below through: changed %v, why %q, %+v", changed, why, old)
	}
}

// TestStatusAtNoPositionIsFoldedInOrderAndKnowsItsLastEvent: on a bus that
// keeps no positions (seq 0) every event is folded in the order handed
// over, Through is left to the stream it counts in, and the one handed
// again (the last folded, a controller stopped before acknowledging it) is
// known by its id and changes nothing, even after a restart (the status's
// JSON).
func TestStatusAtNoPositionIsFoldedInOrderAndKnowsItsLastEvent(t *testing.T) {
	s := Status{Through: 7}
	fail := failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0)
	if !fail.applyTo(t, &s, 0) || len(s.Failing) != 1 || s.Through != 7 || s.LastEventID != wire.HeaderValue(fail.header, wire.HeaderEventID) {
		t.Fatalf("a failing word at no position: expected it held, through 7 and its id kept, got %+v", s)
	}
	recovered := recoveredWord("pg", "billing", "node-a")
	recovered.applyTo(t, &s, 0)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Folded(0, wire.HeaderValue(recovered.header, wire.HeaderEventID)) || recovered.applyTo(t, &back, 0) {
		t.Fatalf("the last event handed again was not known by its id: %s", data)
	}
	if back.Folded(0, "") || back.Folded(0, wire.HeaderValue(fail.header, wire.HeaderEventID)) {
		t.Fatal("expected an event without an id, or one not the last, not taken for folded")
	}
	// An older word handed after (a new event, as far as a bus without
	// positions tells) is folded: the order is the bus's.
	if !fail.applyTo(t, &back, 0) || len(back.Failing) != 1 {
		t.Fatalf("expected the failing word folded again, got %+v", back)
	}
	// An id unfit to keep is not kept (its event is refused): nothing is
	// known by it.
	odd := recoveredWord("pg", "billing", "node-a")
	odd.header[wire.HeaderEventID] = []string{strings.Repeat("x", maxEventID+1)}
	if _, err := back.Apply(0, odd.subject, odd.header, odd.body); !errors.Is(err, ErrBadStatusEvent) || back.LastEventID != "" || len(back.Failing) != 1 {
		t.Fatalf("expected the word refused, nothing else changed and no id kept, got %v, %+v", err, back)
	}
}
