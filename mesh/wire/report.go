package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// KindReport marks a node's report: a reader refuses a body without it,
// so that what the server may be made to write onto a report subject (a
// PubAck, an API answer, a declaration: docs/decisions/0001) is never
// taken for one.
const KindReport = "report"

// Report is what a node says on NodeReport(node), through JetStream with
// a message id (the report's ID, as Nats-Msg-Id) so a report sent twice
// is kept once.
type Report struct {
	Kind string `json:"kind"`
	Node string `json:"node"`
	// ID is the report's own id, also its message id.
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Applied is the revision of the declaration the node runs; Running
	// the versions it runs them at.
	Applied uint64            `json:"applied"`
	Running map[string]string `json:"running,omitempty"`
	// Refused is why the node refused a declaration, when it did: the
	// revision or the stream sequence it refused, and the reason.
	Refused string `json:"refused,omitempty"`
	// Installed are the artifacts the node installed for the declaration
	// it runs, by module (their digests).
	Installed map[string]string `json:"installed,omitempty"`
}

// ErrReport is wrapped by every refusal of a report.
var ErrReport = errors.New("not a node's report")

// MaxReport bounds a report.
const MaxReport = 16 << 10

// ParseReport reads a report strictly from the subject it was stored on:
// one JSON object of kind report, no unknown field, for the node the
// subject names.
func ParseReport(subject string, data []byte) (Report, error) {
	if len(data) > MaxReport {
		return Report{}, fmt.Errorf("%w: %d bytes, more than %d", ErrReport, len(data), MaxReport)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrReport, err)
	}
	if dec.More() {
		return Report{}, fmt.Errorf("%w: more than one JSON value", ErrReport)
	}
	if r.Kind != KindReport {
		return Report{}, fmt.Errorf("%w: kind %q", ErrReport, r.Kind)
	}
	if err := CheckName(r.Node); err != nil {
		return Report{}, fmt.Errorf("%w: node: %v", ErrReport, err)
	}
	if NodeReport(r.Node) != subject {
		return Report{}, fmt.Errorf("%w: it is node %q's, on %s", ErrReport, r.Node, subject)
	}
	if r.ID == "" || r.At.IsZero() {
		return Report{}, fmt.Errorf("%w: no id or time", ErrReport)
	}
	return r, nil
}

// NodeOfReport is the node a report subject (NodeReport) names.
func NodeOfReport(subject string) (string, bool) { return nodeOf(subject, NodeReport) }

// NodeOfCredentials is the node a credential request's subject
// (NodeCredentials) names.
func NodeOfCredentials(subject string) (string, bool) { return nodeOf(subject, NodeCredentials) }

// NodeOfDeclare is the node a declaration subject (NodeDeclare) names.
func NodeOfDeclare(subject string) (string, bool) { return nodeOf(subject, NodeDeclare) }

// nodeOf reads the node out of subject, which spell makes of a node: the
// one token where spell puts it, and the rest as spell writes it.
func nodeOf(subject string, spell func(node string) string) (string, bool) {
	const mark = "\x00"
	before, after, _ := strings.Cut(spell(mark), mark)
	node, ok := strings.CutPrefix(subject, before)
	if !ok {
		return "", false
	}
	node, ok = strings.CutSuffix(node, after)
	return node, ok && node != "" && !strings.ContainsAny(node, ".*> ")
}

// Marshal is the report as it goes on the wire.
func (r Report) Marshal() []byte {
	r.Kind = KindReport
	b, _ := json.Marshal(r)
	return b
}

// Push is an operator's push (SubjectPush): a whole description, which
// the controller validates whole and stores in one transaction, or
// refuses, changing nothing (ADR 0083).
type Push struct {
	Mesh string `json:"mesh"`
}
