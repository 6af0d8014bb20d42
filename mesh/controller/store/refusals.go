package store

import (
	"maps"
	"strings"
	"time"
)

// MaxRefusalsKept is how many of the newest refusals the store keeps in
// full; the counts go on past it. A leaked token may send CONTROL
// refusable messages without end, and must not fill the store.
const MaxRefusalsKept = 50

// The kinds of CONTROL message a refusal is counted under.
const (
	RefusedEnrolment = "enrolment"
	RefusedPush      = "push"
	RefusedReport    = "report"
	RefusedBuild     = "build"
	RefusedOther     = "other"
)

// Refusal is one CONTROL message the controller refused: an enrolment
// answered with a refusal, or a message that could not be read (a
// malformed request, a push whose description fails validation, a report
// from a node that is not enrolled), which was terminated.
type Refusal struct {
	// Kind is what the message was (RefusedEnrolment, …).
	Kind string `json:"kind"`
	// Key is its ledger key (LedgerKey): its subject and publisher's id,
	// or its CONTROL sequence.
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Refusals are what status says of the refused: how many of each kind
// since genesis, and the newest MaxRefusalsKept, oldest first.
type Refusals struct {
	Counts map[string]int `json:"counts"`
	Last   []Refusal      `json:"last"`
}

// Total is how many messages were refused.
func (r Refusals) Total() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// maxReason bounds a refusal's reason as kept: the reason quotes what
// the message said, and the message is a stranger's to make long.
const maxReason = 512

// with is r with x counted and kept, the oldest dropped past the bound.
func (r Refusals) With(x Refusal) Refusals {
	if len(x.Reason) > maxReason {
		x.Reason = strings.ToValidUTF8(x.Reason[:maxReason], "") + "…"
	}
	out := Refusals{Counts: maps.Clone(r.Counts), Last: append([]Refusal(nil), r.Last...)}
	if out.Counts == nil {
		out.Counts = map[string]int{}
	}
	out.Counts[x.Kind]++
	out.Last = append(out.Last, x)
	if over := len(out.Last) - MaxRefusalsKept; over > 0 {
		out.Last = out.Last[over:]
	}
	return out
}

// Normalised is r with its counts and list never nil.
func (r Refusals) Normalised() Refusals {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	if r.Last == nil {
		r.Last = []Refusal{}
	}
	return r
}
