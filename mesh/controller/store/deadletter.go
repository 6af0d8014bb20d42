package store

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// DeadLetter is an event a module's consumer gave up on after its
// deliveries ran out, as DEAD recorded it and the controller folded it.
type DeadLetter struct {
	// DeadSeq is its sequence in DEAD; 0 on a bus that keeps no positions
	// (AMQP), where the letter is known by its consumer and event id (Key).
	DeadSeq  uint64 `json:"dead_seq"`
	Consumer string `json:"consumer"`
	Node     string `json:"node,omitempty"`
	Module   string `json:"module,omitempty"`
	// StreamSeq is the event's sequence in EVENTS (0 on a bus that keeps
	// none); Subject and EventID are read from EVENTS while it still
	// holds the event, or on AMQP from the letter itself.
	StreamSeq  uint64    `json:"stream_seq"`
	Subject    string    `json:"subject,omitempty"`
	EventID    string    `json:"event_id,omitempty"`
	Deliveries int       `json:"deliveries"`
	At         time.Time `json:"at"`
}

// Key is what a store keeps a dead letter by, one record per key: its
// DEAD sequence, or where it has none, its consumer and its event's id. So
// a letter the bus hands again (the controller stopped before the bus
// took it back) replaces its own record, and the letters of a bus without
// positions never meet DEAD's sequences, should the mesh move to NATS
// with its store. A consumer is a name (no space), so the key is one
// letter's alone.
func (d DeadLetter) Key() string {
	if d.DeadSeq != 0 {
		return fmt.Sprintf("seq:%020d", d.DeadSeq)
	}
	return "event:" + d.Consumer + " " + d.EventID
}

// SortDeadLetters orders dead letters as a store gives them back: by
// DEAD sequence (those without one first), then by when they died.
func SortDeadLetters(ds []DeadLetter) {
	slices.SortFunc(ds, func(a, b DeadLetter) int {
		return cmp.Or(cmp.Compare(a.DeadSeq, b.DeadSeq), a.At.Compare(b.At), cmp.Compare(a.Key(), b.Key()))
	})
}
