package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshbus/mesh/mesh/wire"
)

// Status is what the controller says of the mesh beyond the streams it
// asserts. Today that is the provisions their providers keep failing (ADR
// 0224): a provider's loop knows alone whether a provision was made, so
// its provisioner.failing is the only way anyone else learns of it, and
// status names each one until provisioner.recovered ends it.
//
// Status is folded from EVENTS in stream order (status.FollowStatus) and kept in
// the controller's store, so a restarted controller resumes where it
// stopped and a person can read it without asking the running one. On a
// bus that keeps no positions (AMQP) it is folded in the order the
// controller's status queue hands the events over, one at a time.
type Status struct {
	// Failing is the newest failing word per provider, machine and
	// consumer, sorted by provider, node and consumer.
	Failing []FailingProvision `json:"failing"`
	// Through is the EVENTS sequence of the last event folded in. An event
	// at or below it is a redelivery of one already applied: acknowledged,
	// never applied twice.
	Through uint64 `json:"through"`
	// EventsCreated is when the EVENTS stream Through counts in was
	// created. A stream deleted and created again numbers its events from
	// 1: Rebase sees it by this time (or by a last sequence below
	// Through) and starts Through again.
	EventsCreated time.Time `json:"events_created,omitzero"`
	// LastEventID is the x-event-id of the last event folded in, ""
	// when it had none fit to keep. A bus that keeps no positions hands
	// the status its events one at a time, in order, and hands one again
	// only while it is the last handed over (a controller stopped between
	// saving and acknowledging): there a redelivery is known by this id.
	LastEventID string `json:"last_event_id,omitempty"`
}

// What the status holds is bounded, since it is folded from what
// providers say: a provider (the subject's module, a name) names
// consumers as a module and a machine (each a name), a class from
// wire.ErrorClasses, the node it speaks from (a name) and an event id of
// printable text, at most maxEventID bytes; and at most
// MaxFailingPerProvider consumers at once. The providers themselves are
// bounded by the mesh: the server lets only a module that provides
// publish provisioner.failing, on its own subject. A word past a bound is
// refused (ErrBadStatusEvent) and what the status already holds is kept;
// a provider that still fails says so again within fifteen minutes.
const (
	// MaxFailingPerProvider is how many consumers one provider may have
	// named failing at once: far above the placements of any mesh, and
	// what keeps a provider gone wrong from growing the status file
	// without end.
	MaxFailingPerProvider = 1024
	maxEventID            = 128
)

// FailingProvision is a provider's newest word that it keeps failing a
// consumer.
type FailingProvision struct {
	// Provider is the providing module: the module of the event's subject,
	// which the server lets nobody else publish on.
	Provider string `json:"provider"`
	// Consumer and Node name the consumer: a module and its machine.
	Consumer string `json:"consumer"`
	Node     string `json:"node"`
	// Class is the class of error the provider gave (wire.Class*).
	Class string `json:"class"`
	// Since is when the failure began, as the provider said.
	Since time.Time `json:"since"`
	// Said is when the provider said so last (the event's x-time), ReportedBy the
	// node whose loop said it (x-node) and EventID its x-event-id: where
	// to look in EVENTS.
	Said       time.Time `json:"said"`
	ReportedBy string    `json:"reported_by"`
	EventID    string    `json:"event_id"`
}

// ErrBadStatusEvent is wrapped by the refusal of a provisioner event the
// controller cannot read; the event is consumed and its sequence passed.
var ErrBadStatusEvent = errors.New("unreadable provisioner event")

// Folded reports whether the event at sequence seq of EVENTS, with event
// id id, is one the status has folded already: at or below Through; on a
// bus that keeps no positions (seq 0), the last one folded, by its id.
func (s *Status) Folded(seq uint64, id string) bool {
	if seq == 0 {
		return id != "" && id == s.LastEventID
	}
	return seq <= s.Through
}

// Apply folds the event stored at sequence seq of EVENTS into the status.
// It reports whether the failing list changed. An event Folded already
// changes nothing; any other moves Through to seq and LastEventID to its
// id, even when it is refused with ErrBadStatusEvent, since reading it
// again cannot make it readable. seq 0 is an event of a bus that keeps no
// positions: Through, which counts in the EVENTS stream the status was
// last folded from, stays where it is.
func (s *Status) Apply(seq uint64, subject string, header map[string][]string, body []byte) (changed bool, err error) {
	id := wire.HeaderValue(header, wire.HeaderEventID)
	if s.Folded(seq, id) {
		return false, nil
	}
	if seq != 0 {
		s.Through = seq
	}
	s.LastEventID = ""
	if len(id) <= maxEventID && printable(id) {
		s.LastEventID = id
	}
	provider, key, ok := wire.EventOf(subject)
	if !ok {
		return false, fmt.Errorf("%w: %s is not a module's event subject", ErrBadStatusEvent, subject)
	}
	// The server lets only a module publish on its subject, and the
	// subject's module is what the status is keyed by: a name, like every
	// other name it holds.
	if err := wire.CheckName(provider); err != nil {
		return false, fmt.Errorf("%w: %s: provider: %w", ErrBadStatusEvent, subject, err)
	}
	// An x-source naming anyone else, a body that is not JSON, or no
	// envelope at all (a PubAck or an API status aimed at this subject
	// through a reply: docs/decisions/0001) is refused.
	if err := wire.ValidateEvent(provider, header, body); err != nil {
		return false, fmt.Errorf("%w: %s at %d: %w", ErrBadStatusEvent, subject, seq, err)
	}
	switch key {
	case wire.EventProvisionerFailing:
		var e wire.FailingEvent
		if err := readStatusBody(body, &e, &e.ConsumerRef); err != nil {
			return false, fmt.Errorf("%w: %s at %d: %w", ErrBadStatusEvent, subject, seq, err)
		}
		if e.Class == "" || e.Since.IsZero() {
			return false, fmt.Errorf("%w: %s at %d: class and since are required", ErrBadStatusEvent, subject, seq)
		}
		if !slices.Contains(wire.ErrorClasses, e.Class) {
			return false, fmt.Errorf("%w: %s at %d: class %q is not one of %s", ErrBadStatusEvent, subject, seq, e.Class, strings.Join(wire.ErrorClasses, ", "))
		}
		reporter, id := wire.HeaderValue(header, wire.HeaderNode), wire.HeaderValue(header, wire.HeaderEventID)
		if err := wire.CheckName(reporter); err != nil {
			return false, fmt.Errorf("%w: %s at %d: %s: %w", ErrBadStatusEvent, subject, seq, wire.HeaderNode, err)
		}
		if len(id) > maxEventID {
			return false, fmt.Errorf("%w: %s at %d: %s is %d bytes, more than %d", ErrBadStatusEvent, subject, seq, wire.HeaderEventID, len(id), maxEventID)
		}
		if !printable(id) {
			// The status file is JSON: a byte that is not text would come
			// back from it as another id than the one in EVENTS.
			return false, fmt.Errorf("%w: %s at %d: %s %q is not printable text", ErrBadStatusEvent, subject, seq, wire.HeaderEventID, id)
		}
		said, _ := wire.ParseTime(wire.HeaderValue(header, wire.HeaderTime)) // validated above
		f := FailingProvision{
			Provider: provider, Consumer: e.Consumer, Node: e.Node,
			Class: e.Class, Since: e.Since.UTC(),
			Said: said.UTC(), ReportedBy: reporter, EventID: id,
		}
		if !s.holds(f) && s.count(provider) >= MaxFailingPerProvider {
			return false, fmt.Errorf("%w: %s at %d: provider %q already names %d consumers failing, the most the status holds; %s on %s is not added",
				ErrBadStatusEvent, subject, seq, provider, MaxFailingPerProvider, e.Consumer, e.Node)
		}
		s.put(f)
		return true, nil
	case wire.EventProvisionerRecovered:
		var e wire.RecoveredEvent
		if err := readStatusBody(body, &e, &e.ConsumerRef); err != nil {
			return false, fmt.Errorf("%w: %s at %d: %w", ErrBadStatusEvent, subject, seq, err)
		}
		return s.remove(provider, e.ConsumerRef), nil
	default:
		return false, fmt.Errorf("%w: %s: the status is not made of %s", ErrBadStatusEvent, subject, key)
	}
}

// readStatusBody decodes a failing or recovered body into e, whose consumer
// ref must name the consumer wholly: a module on a machine, never one of
// them.
func readStatusBody(body []byte, e any, ref *wire.ConsumerRef) error {
	if err := json.Unmarshal(body, e); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if err := wire.CheckName(ref.Consumer); err != nil {
		return fmt.Errorf("body: consumer: %w", err)
	}
	if err := wire.CheckName(ref.Node); err != nil {
		return fmt.Errorf("body: node: %w", err)
	}
	return nil
}

// Rebase checks the status against the EVENTS stream it is about to be
// folded from, created at created and ending at lastSeq. When the status
// was folded from another stream (EVENTS deleted and created again, and so
// numbered from 1 again), Through is started again at 0, so that the new
// stream's events are not taken for redeliveries, and why says what was
// seen; what Failing names is kept, since a stream recreated does not make
// a provision succeed. It reports whether the status changed.
func (s *Status) Rebase(created time.Time, lastSeq uint64) (changed bool, why string) {
	switch {
	case !s.EventsCreated.IsZero() && !s.EventsCreated.Equal(created):
		why = fmt.Sprintf("EVENTS was created at %s; the status was folded from one created at %s", created.UTC().Format(time.RFC3339Nano), s.EventsCreated.UTC().Format(time.RFC3339Nano))
	case lastSeq < s.Through:
		why = fmt.Sprintf("EVENTS ends at sequence %d, below the status's through %d", lastSeq, s.Through)
	}
	if why != "" && s.Through != 0 {
		s.Through = 0
		changed = true
	}
	if !s.EventsCreated.Equal(created) {
		s.EventsCreated = created
		changed = true
	}
	return changed, why
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// holds reports whether the status names f's provider, node and consumer.
func (s *Status) holds(f FailingProvision) bool {
	_, found := slices.BinarySearchFunc(s.Failing, f, compareFailing)
	return found
}

// count is how many consumers provider names failing.
func (s *Status) count(provider string) int {
	n := 0
	for _, f := range s.Failing {
		if f.Provider == provider {
			n++
		}
	}
	return n
}

func (s *Status) put(f FailingProvision) {
	i, found := slices.BinarySearchFunc(s.Failing, f, compareFailing)
	if found {
		s.Failing[i] = f
		return
	}
	s.Failing = slices.Insert(s.Failing, i, f)
}

func (s *Status) remove(provider string, ref wire.ConsumerRef) bool {
	i, found := slices.BinarySearchFunc(s.Failing, FailingProvision{Provider: provider, Consumer: ref.Consumer, Node: ref.Node}, compareFailing)
	if found {
		s.Failing = slices.Delete(s.Failing, i, i+1)
	}
	return found
}

// Normalised is s as a store gives it back: Failing sorted by provider,
// node and consumer, and empty rather than nil. A store that keeps the
// status as a document calls it on what it reads.
func (s Status) Normalised() Status {
	if s.Failing == nil {
		s.Failing = []FailingProvision{}
	}
	slices.SortFunc(s.Failing, compareFailing)
	return s
}

func compareFailing(a, b FailingProvision) int {
	return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Consumer, b.Consumer))
}

// Clone is a copy Apply can change without touching s.
func (s Status) Clone() Status {
	s.Failing = slices.Clone(s.Failing)
	return s
}
