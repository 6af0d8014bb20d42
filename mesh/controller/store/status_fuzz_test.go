package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// fuzzBase is the status a fuzzed event is folded into: some failing words
// held, through 100 of an EVENTS created at a known time.
func fuzzBase(t *testing.T) Status {
	t.Helper()
	s := Status{EventsCreated: since0.Add(-time.Hour)}
	failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0).applyTo(t, &s, 98)
	failingWord("kc", "billing", "node-b", wire.ClassSecret, said0).applyTo(t, &s, 99)
	failingWord("pg", "ledger", "node-b", wire.ClassTimeout, said0).applyTo(t, &s, 100)
	return s
}

// FuzzStatusApply folds one event, whatever its subject, envelope, body
// and sequence, into a status holding some failing words, and checks what
// the fold promises: it never panics; an event folded already (at or below
// Through; at no position, the last one's id) changes nothing; any other
// passes Through to its sequence (at no position, leaves it), and when refused
// (always with ErrBadStatusEvent) changes nothing else; what the status
// holds stays sorted, unique per provider, machine and consumer, and
// within its bounds; a failing word is then held as said, a recovered one
// no longer; and the status survives its file's JSON. Seeds:
// testdata/fuzz/FuzzStatusApply.
func FuzzStatusApply(f *testing.F) {
	f.Fuzz(func(t *testing.T, subject, eventID, source, node, xtime, contentType string, body []byte, seq uint64) {
		header := map[string][]string{}
		for name, v := range map[string]string{
			wire.HeaderEventID: eventID, wire.HeaderSource: source, wire.HeaderNode: node,
			wire.HeaderTime: xtime, wire.HeaderContentType: contentType,
		} {
			if v != "" {
				header[name] = []string{v}
			}
		}
		base := fuzzBase(t)
		s := base.Clone()
		changed, err := s.Apply(seq, subject, header, body)

		if base.Folded(seq, wire.HeaderValue(header, wire.HeaderEventID)) {
			if changed || err != nil || !reflect.DeepEqual(s, base) {
				t.Fatalf("an event at %d, folded already (through %d, last %q), changed the status (changed %v, err %v)", seq, base.Through, base.LastEventID, changed, err)
			}
			return
		}
		// Seq 0 is a bus keeping no positions: Through stays.
		if want := cmp.Or(seq, base.Through); s.Through != want {
			t.Fatalf("through %d after an event at %d, want %d", s.Through, seq, want)
		}
		if s.LastEventID != "" && s.LastEventID != eventID {
			t.Fatalf("last event id %q after an event of id %q", s.LastEventID, eventID)
		}
		if seq == 0 && s.LastEventID != "" && !s.Folded(0, eventID) {
			t.Fatalf("an event of id %q at no position is not known again once folded", eventID)
		}
		if err != nil {
			if !errors.Is(err, ErrBadStatusEvent) {
				t.Fatalf("refused without ErrBadStatusEvent: %v", err)
			}
			if changed || !reflect.DeepEqual(s.Failing, base.Failing) {
				t.Fatalf("a refused event changed what is failing: %v", err)
			}
			return
		}
		if !changed && !reflect.DeepEqual(s.Failing, base.Failing) {
			t.Fatal("what is failing changed, and Apply said it did not")
		}
		checkStatusInvariants(t, s)

		provider, key, _ := wire.EventOf(subject)
		var ref wire.ConsumerRef
		_ = json.Unmarshal(body, &ref)
		held := s.holds(FailingProvision{Provider: provider, Consumer: ref.Consumer, Node: ref.Node})
		switch key {
		case wire.EventProvisionerFailing:
			if !held {
				t.Fatalf("a failing word accepted is not held: %s %+v", provider, ref)
			}
		case wire.EventProvisionerRecovered:
			if held {
				t.Fatalf("a recovered word accepted, and the consumer is still failing: %s %+v", provider, ref)
			}
		default:
			t.Fatalf("accepted an event of key %q", key)
		}

		data, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("the status does not marshal: %v", err)
		}
		var back Status
		if err := json.Unmarshal(data, &back); err != nil || !equalStatus(back, s) {
			t.Fatalf("the status does not survive its file: %v\n%s", err, data)
		}
	})
}

func checkStatusInvariants(t *testing.T, s Status) {
	t.Helper()
	if !slices.IsSortedFunc(s.Failing, compareFailing) {
		t.Fatal("failing is not sorted")
	}
	perProvider := map[string]int{}
	for i, f := range s.Failing {
		if i > 0 && compareFailing(s.Failing[i-1], f) == 0 {
			t.Fatalf("%s/%s/%s is held twice", f.Provider, f.Node, f.Consumer)
		}
		for what, name := range map[string]string{"provider": f.Provider, "consumer": f.Consumer, "node": f.Node, "reported_by": f.ReportedBy} {
			if err := wire.CheckName(name); err != nil {
				t.Fatalf("held a %s that is no name: %v", what, err)
			}
		}
		if !slices.Contains(wire.ErrorClasses, f.Class) {
			t.Fatalf("held class %q", f.Class)
		}
		if len(f.EventID) == 0 || len(f.EventID) > maxEventID || !printable(f.EventID) {
			t.Fatalf("held an event id of %d bytes: %q", len(f.EventID), f.EventID)
		}
		if f.Since.IsZero() || f.Said.IsZero() {
			t.Fatalf("held a word without since or said: %+v", f)
		}
		perProvider[f.Provider]++
		if perProvider[f.Provider] > MaxFailingPerProvider {
			t.Fatalf("provider %s holds more than %d", f.Provider, MaxFailingPerProvider)
		}
	}
}

func equalStatus(a, b Status) bool {
	if a.Through != b.Through || !a.EventsCreated.Equal(b.EventsCreated) || a.LastEventID != b.LastEventID || len(a.Failing) != len(b.Failing) {
		return false
	}
	for i := range a.Failing {
		x, y := a.Failing[i], b.Failing[i]
		if x.Provider != y.Provider || x.Consumer != y.Consumer || x.Node != y.Node || x.Class != y.Class ||
			!x.Since.Equal(y.Since) || !x.Said.Equal(y.Said) || x.ReportedBy != y.ReportedBy || x.EventID != y.EventID {
			return false
		}
	}
	return true
}
