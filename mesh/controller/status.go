package controller

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// StatusFile is the controller's status in its state directory.
const StatusFile = "status.json"

// Status is what the controller says of the mesh beyond the streams it
// asserts. Today that is the provisions their providers keep failing (ADR
// 0224): a provider's loop knows alone whether a provision was made, so
// its provisioner.failing is the only way anyone else learns of it, and
// status names each one until provisioner.recovered ends it.
//
// Status is folded from EVENTS in stream order (FollowStatus) and kept in
// the state directory, so a restarted controller resumes where it stopped
// and a person can read it without asking the running one.
type Status struct {
	// Failing is the newest failing word per provider, machine and
	// consumer, sorted by provider, node and consumer.
	Failing []FailingProvision `json:"failing"`
	// Through is the EVENTS sequence of the last event folded in. An event
	// at or below it is a redelivery of one already applied: acknowledged,
	// never applied twice.
	Through uint64 `json:"through"`
}

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

// Apply folds the event stored at sequence seq of EVENTS into the status.
// It reports whether the failing list changed. An event at or below Through
// changes nothing; any other moves Through to seq, even when it is refused
// with ErrBadStatusEvent, since reading it again cannot make it readable.
func (s *Status) Apply(seq uint64, subject string, header map[string][]string, body []byte) (changed bool, err error) {
	if seq <= s.Through {
		return false, nil
	}
	s.Through = seq
	provider, key, ok := wire.EventOf(subject)
	if !ok {
		return false, fmt.Errorf("%w: %s is not a module's event subject", ErrBadStatusEvent, subject)
	}
	if err := wire.ValidateHeaders(header); err != nil {
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
		said, _ := wire.ParseTime(wire.HeaderValue(header, wire.HeaderTime)) // validated above
		s.put(FailingProvision{
			Provider: provider, Consumer: e.Consumer, Node: e.Node,
			Class: e.Class, Since: e.Since.UTC(),
			Said: said.UTC(), ReportedBy: wire.HeaderValue(header, wire.HeaderNode), EventID: wire.HeaderValue(header, wire.HeaderEventID),
		})
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

func compareFailing(a, b FailingProvision) int {
	return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Consumer, b.Consumer))
}

// clone is a copy Apply can change without touching s.
func (s Status) clone() Status {
	s.Failing = slices.Clone(s.Failing)
	return s
}

// LoadStatus reads the status of a state directory; a directory without
// one has the empty status.
func LoadStatus(dir string) (Status, error) {
	path := Layout{dir}.Status()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Status{Failing: []FailingProvision{}}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("read status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		// Removing it loses nothing for long: a provider says again every
		// fifteen minutes what it keeps failing.
		return Status{}, fmt.Errorf("read status %s: %w (remove the file to start from an empty status; providers repeat their failing words within fifteen minutes)", path, err)
	}
	if s.Failing == nil {
		s.Failing = []FailingProvision{}
	}
	slices.SortFunc(s.Failing, compareFailing)
	return s, nil
}

// SaveStatus writes the status of a state directory atomically: a reader
// sees the old status or the new one.
func SaveStatus(dir string, s Status) error {
	if s.Failing == nil {
		s.Failing = []FailingProvision{}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	_, err = writeAtomic(Layout{dir}.Status(), append(data, '\n'), 0o644)
	return err
}

// Status is the controller's status file.
func (l Layout) Status() string { return filepath.Join(l.Dir, StatusFile) }
