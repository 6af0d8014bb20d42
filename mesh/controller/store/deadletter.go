package store

import (
	"cmp"
	"slices"
	"time"
)

// DeadLetter is an event a module's consumer gave up on after its
// deliveries ran out, as DEAD recorded it and the controller folded it.
type DeadLetter struct {
	// DeadSeq is its sequence in DEAD.
	DeadSeq  uint64 `json:"dead_seq"`
	Consumer string `json:"consumer"`
	Node     string `json:"node,omitempty"`
	Module   string `json:"module,omitempty"`
	// StreamSeq is the event's sequence in EVENTS; Subject and EventID
	// are read from EVENTS while it still holds the event.
	StreamSeq  uint64    `json:"stream_seq"`
	Subject    string    `json:"subject,omitempty"`
	EventID    string    `json:"event_id,omitempty"`
	Deliveries int       `json:"deliveries"`
	At         time.Time `json:"at"`
}

func sortDead(ds []DeadLetter) {
	slices.SortFunc(ds, func(a, b DeadLetter) int { return cmp.Compare(a.DeadSeq, b.DeadSeq) })
}
