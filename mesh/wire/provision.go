package wire

// Provisioning (design 19, "Capability: provisioning"; ADR 0224, ADR
// 0230): the contributions file a provider reads, the events its loop
// publishes, the four retirement tools and the JSON each of them carries.
//
// The contributions file is a JSON array of entries, one per consumer:
//
//	[
//	  {"as": "billing", "node": "node-a", "secret": "…", "at": "2026-10-06T12:00:00Z",
//	   "values": {"database": "orders"}}
//	]
//
// A consumer is one thing with two parts, the module that asks (as) and the
// machine it runs on (node): a grant addressed to a node alone would not
// name a consumer, and withdrawing it would take another's away. So an
// entry without as or node is refused, never guessed at. secret, at and
// values may be absent; values is read into one canonical form, so that
// two files saying the same say it in the same bytes. Unknown fields are
// ignored, for the reason design 19 gives for unknown x- headers: the
// file is read by every provider, and one that refused a new field would
// make adding it a breaking change.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Field names of an entry of the contributions file.
const (
	// ContributionAs is the consuming module's name.
	ContributionAs = "as"
	// ContributionSecret is the secret the mesh minted for the consumer,
	// opaque to everything but the provider, which reads it; never logged.
	ContributionSecret = "secret"
	// ContributionNode is the machine the consuming module runs on.
	ContributionNode = "node"
	// ContributionAt is when the consumer contributed, RFC 3339.
	ContributionAt = "at"
	// ContributionValues is what the consumer contributed: a JSON object
	// whose shape belongs to the provision.
	ContributionValues = "values"
)

// Contribution is one entry of the contributions file.
type Contribution struct {
	As     string          `json:"as"`
	Secret string          `json:"secret,omitempty"`
	Node   string          `json:"node"`
	At     time.Time       `json:"at,omitzero"`
	Values json.RawMessage `json:"values,omitempty"`
}

// ErrBadContributions is wrapped by every refusal of a contributions file.
var ErrBadContributions = errors.New("invalid contributions")

// ParseContributions reads a contributions file. A refusal names the entry
// (entries[i], with its as when known) and the field; two entries naming
// the same consumer (as and node) are refused, since which one holds is
// not something to guess.
func ParseContributions(data []byte) ([]Contribution, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty file (want a JSON array of entries)", ErrBadContributions)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%w: want a JSON array of entries: %v", ErrBadContributions, err)
	}
	out := make([]Contribution, 0, len(raws))
	first := make(map[[2]string]int, len(raws))
	for i, raw := range raws {
		c, err := parseContribution(raw)
		if err != nil {
			where := fmt.Sprintf("entries[%d]", i)
			if c.As != "" {
				where += fmt.Sprintf(" (as %q)", c.As)
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrBadContributions, where, err)
		}
		key := [2]string{c.As, c.Node}
		if j, dup := first[key]; dup {
			return nil, fmt.Errorf("%w: entries[%d]: consumer as %q on node %q is already entries[%d]",
				ErrBadContributions, i, c.As, c.Node, j)
		}
		first[key] = i
		out = append(out, c)
	}
	return out, nil
}

func parseContribution(raw json.RawMessage) (Contribution, error) {
	var c Contribution
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return c, errors.New("want an object")
	}
	str := func(name string) (string, error) {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			// The value is not shown: it may be the secret, written wrong.
			return "", fmt.Errorf("field %s: want a string, got %s", name, jsonKind(v))
		}
		return s, nil
	}
	name := func(field string) (string, error) {
		s, err := str(field)
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", fmt.Errorf("field %s is missing", field)
		}
		if err := CheckName(s); err != nil {
			return "", fmt.Errorf("field %s: %v", field, err)
		}
		return s, nil
	}
	var err error
	// as is read first, so that a later refusal can name the entry by it.
	if c.As, err = str(ContributionAs); err != nil {
		return c, err
	}
	if c.As, err = name(ContributionAs); err != nil {
		return c, err
	}
	if c.Node, err = name(ContributionNode); err != nil {
		return c, err
	}
	if c.Secret, err = str(ContributionSecret); err != nil {
		return c, err
	}
	at, err := str(ContributionAt)
	if err != nil {
		return c, err
	}
	if at != "" {
		if c.At, err = time.Parse(time.RFC3339, at); err != nil {
			return c, fmt.Errorf("field %s: want an RFC 3339 time, got %q", ContributionAt, at)
		}
	}
	if v, ok := fields[ContributionValues]; ok && string(v) != "null" {
		if !strings.HasPrefix(strings.TrimSpace(string(v)), "{") {
			return c, fmt.Errorf("field %s: want an object, got %s", ContributionValues, jsonKind(v))
		}
		canon, err := canonicalJSON(v)
		if err != nil {
			return c, fmt.Errorf("field %s: %v", ContributionValues, err)
		}
		c.Values = canon
	}
	return c, nil
}

// canonicalJSON writes a JSON value one way whatever way it was written:
// no white space, an object's keys sorted (the last of a duplicated key
// kept), strings with no escape they do not need, numbers as written. A
// provider compares what a consumer contributed byte for byte to see
// whether it changed, and the file may be written by an encoder that
// escapes '&' or orders keys otherwise than the last one did.
func canonicalJSON(v json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonKind names the kind of a JSON value, for a refusal that must not
// show the value itself.
func jsonKind(v json.RawMessage) string {
	t := strings.TrimSpace(string(v))
	switch {
	case t == "":
		return "nothing"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "an array"
	case t[0] == '"':
		return "a string"
	case t == "true" || t == "false":
		return "a boolean"
	case t == "null":
		return "null"
	default:
		return "a number"
	}
}

// Event keys a provider's loop publishes in its own namespace. They are
// derived, never declared: every module that receives contributions may
// publish them (design 19).
const (
	// EventProvisionerFailing carries a FailingEvent.
	EventProvisionerFailing = "provisioner.failing"
	// EventProvisionerRecovered carries a RecoveredEvent.
	EventProvisionerRecovered = "provisioner.recovered"
	// EventProvisionerRetirement carries a RetirementEvent.
	EventProvisionerRetirement = "provisioner.retirement"
)

// ProvisionerEvents are the keys every provider may publish.
var ProvisionerEvents = []string{EventProvisionerFailing, EventProvisionerRecovered, EventProvisionerRetirement}

// ProvisionerStatusEvents are the subjects, across every provider, the
// controller reads its status from (ADR 0224): the failing word and the
// word that ends it. The provider is the subject's module, which the server
// lets nobody else publish.
var ProvisionerStatusEvents = []string{
	EventSubject("*", EventProvisionerFailing),
	EventSubject("*", EventProvisionerRecovered),
}

// The four tools every provider serves (ADR 0230). The controller's retire
// verb asks the approve tool, its cleanup verb the delete tool.
const (
	// ToolProvisionerRetirement takes no arguments (empty, null or {}) and
	// answers a RetirementStatus.
	ToolProvisionerRetirement = "provisioner_retirement"
	// ToolProvisionerRetireApprove takes SetArgs and answers an
	// ApproveResult: the pending set is retired.
	ToolProvisionerRetireApprove = "provisioner_retire_approve"
	// ToolProvisionerRetireReject takes SetArgs and answers a RejectResult:
	// the pending set is kept active.
	ToolProvisionerRetireReject = "provisioner_retire_reject"
	// ToolProvisionerDelete takes a ConsumerRef and answers a DeleteResult;
	// only a retired consumer may be deleted.
	ToolProvisionerDelete = "provisioner_delete"
)

// ProvisionerToolPrefix begins the name of every provisioner tool; a
// manifest may not declare a tool so named, nor use one.
const ProvisionerToolPrefix = "provisioner_"

// ProvisionerTools are the tools every provider serves.
var ProvisionerTools = []string{ToolProvisionerRetirement, ToolProvisionerRetireApprove, ToolProvisionerRetireReject, ToolProvisionerDelete}

// A consumer's states (ADR 0230). Deleted is terminal and never listed: a
// deleted consumer is no longer held.
const (
	ConsumerActive  = "active"
	ConsumerRetired = "retired"
	ConsumerDeleted = "deleted"
)

// Classes of error a FailingEvent names. A provider classifies its own
// errors; what it leaves unclassified is ClassUnknown.
const (
	// ClassUnreachable: the provider's backend could not be reached.
	ClassUnreachable = "unreachable"
	// ClassRefused: the backend refused the provider (authentication,
	// permission, quota).
	ClassRefused = "refused"
	// ClassSecret: the secret the mesh minted for the consumer could not be
	// read.
	ClassSecret = "secret"
	// ClassInvalid: what the consumer contributed cannot be provisioned.
	ClassInvalid = "invalid"
	// ClassTimeout: the operation did not finish in time.
	ClassTimeout = "timeout"
	// ClassUnknown: anything the provider did not classify.
	ClassUnknown = "unknown"
)

// ErrorClasses are every class a FailingEvent may name: what a provider
// cannot classify is ClassUnknown, never a word of its own.
var ErrorClasses = []string{ClassUnreachable, ClassRefused, ClassSecret, ClassInvalid, ClassTimeout, ClassUnknown}

// Why a RecoveredEvent was sent.
const (
	// RecoveredSuccess: the first success after provisioner.failing.
	RecoveredSuccess = "success"
	// RecoveredWithdrawn: the consumer is no longer asked for.
	RecoveredWithdrawn = "withdrawn"
	// RecoveredRestart: the consumer's first success since the provider
	// started. A restarted loop cannot know what its predecessor announced,
	// so it clears whatever the controller may still hold.
	RecoveredRestart = "restart"
)

// Actions a RetirementEvent reports.
const (
	// RetirementPending: a set waits for a person (more than three, or
	// more than half of those held).
	RetirementPending = "pending"
	// RetirementRetired: the set's consumers were retired.
	RetirementRetired = "retired"
	// RetirementRejected: a person rejected the pending set; it stays
	// active and is not proposed again while it stays the same set.
	RetirementRejected = "rejected"
	// RetirementCancelled: a pending set changed (a consumer was asked
	// for again, or another went unasked) before a person decided.
	RetirementCancelled = "cancelled"
	// RetirementReenabled: a retired consumer was asked for again and the
	// ordinary create re-enabled it.
	RetirementReenabled = "reenabled"
	// RetirementDeleted: a person deleted a retired consumer.
	RetirementDeleted = "deleted"
)

// States of the set of unasked consumers, as RetirementStatus shows it.
const (
	SetCounting = "counting"
	SetPending  = "pending"
	SetRejected = "rejected"
)

// ConsumerRef names a consumer in events and tools: the module that asks
// and its machine.
type ConsumerRef struct {
	Consumer string `json:"consumer"`
	Node     string `json:"node"`
}

// FailingEvent is the body of provisioner.failing: a consumer the loop has
// failed for five minutes without one success, sent again every fifteen
// minutes while it lasts. Since is when the failure began.
type FailingEvent struct {
	ConsumerRef
	Class string    `json:"class"`
	Since time.Time `json:"since"`
}

// RecoveredEvent is the body of provisioner.recovered.
type RecoveredEvent struct {
	ConsumerRef
	Reason string `json:"reason"`
}

// RetirementEvent is the body of provisioner.retirement.
type RetirementEvent struct {
	Action string `json:"action"`
	// Set identifies the set of unasked consumers (pending, retired,
	// rejected, cancelled); empty for reenabled and deleted.
	Set       string        `json:"set,omitempty"`
	Consumers []ConsumerRef `json:"consumers"`
	At        time.Time     `json:"at"`
	// Why is the mark's reason (retired) or why a person is needed
	// (pending).
	Why string `json:"why,omitempty"`
	// AccessKept is true when the provider has no way to disable, so a
	// retired consumer was only marked and keeps its access.
	AccessKept bool `json:"access_kept,omitempty"`
}

// RetirementStatus answers provisioner_retirement.
type RetirementStatus struct {
	Consumers []ConsumerStatus `json:"consumers"`
	// Unasked is the current set of active consumers nobody asks for, if
	// any.
	Unasked *UnaskedSet `json:"unasked,omitempty"`
}

// ConsumerStatus is one consumer the provider holds or is asked for.
type ConsumerStatus struct {
	ConsumerRef
	State      string    `json:"state"`
	Asked      bool      `json:"asked"`
	RetiredAt  time.Time `json:"retired_at,omitzero"`
	Why        string    `json:"why,omitempty"`
	AccessKept bool      `json:"access_kept,omitempty"`
}

// UnaskedSet is a set of active consumers gone unasked, a candidate for
// retirement.
type UnaskedSet struct {
	Set       string        `json:"set"`
	Consumers []ConsumerRef `json:"consumers"`
	State     string        `json:"state"`
	// Passes counts the consecutive readings of the contributions file that
	// found this same set unasked; Since is the first of them.
	Passes int       `json:"passes"`
	Since  time.Time `json:"since"`
	// Reason says why a pending set waits for a person.
	Reason string `json:"reason,omitempty"`
}

// SetArgs are the arguments of provisioner_retire_approve and
// provisioner_retire_reject: the set as provisioner_retirement showed it.
type SetArgs struct {
	Set string `json:"set"`
}

// ApproveResult answers provisioner_retire_approve.
type ApproveResult struct {
	Set     string        `json:"set"`
	Retired []ConsumerRef `json:"retired"`
	// Failed lists consumers whose retirement failed; they stay active.
	Failed     []ConsumerRef `json:"failed,omitempty"`
	AccessKept bool          `json:"access_kept,omitempty"`
}

// RejectResult answers provisioner_retire_reject.
type RejectResult struct {
	Set  string        `json:"set"`
	Kept []ConsumerRef `json:"kept"`
}

// DeleteResult answers provisioner_delete.
type DeleteResult struct {
	ConsumerRef
	State string `json:"state"`
}
