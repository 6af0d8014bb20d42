package store

import (
	"fmt"
	"time"
)

// How the controller tells a quiet node: heartbeats come every few seconds
// (the host's DefaultHeartbeat); a node not heard for QuietAfter, by a
// controller connected to the bus all that time, has gone quiet. The
// controller writes what it heard every LivenessEvery; a record older
// than staleAfter says the controller is not looking.
const (
	QuietAfter    = 20 * time.Second
	LivenessEvery = 5 * time.Second
	staleAfter    = 3 * LivenessEvery
)

// Liveness is what the controller last wrote of the nodes' heartbeats.
type Liveness struct {
	// At is when it was written; Connected whether the controller's bus
	// connection was up then, and since when without a break.
	At             time.Time `json:"at"`
	Connected      bool      `json:"connected"`
	ConnectedSince time.Time `json:"connected_since,omitzero"`
	// Heard is each node's last heartbeat, by the controller's clock.
	Heard map[string]time.Time `json:"heard"`
}

// Quiet says whether node has gone quiet at now, and if that cannot be
// told, why. A controller whose own connection is down, or was until
// lately, calls nobody quiet: it did not hear because it could not (a
// control plane that once took its own disconnection for a dead fleet
// deleted every host).
func (l Liveness) Quiet(node string, now time.Time) (quiet bool, unknown string) {
	switch {
	case l.At.IsZero():
		return false, "the controller has not listened yet"
	case now.Sub(l.At) > staleAfter:
		return false, fmt.Sprintf("the controller has not listened since %s", l.At.UTC().Format(time.RFC3339))
	case !l.Connected:
		return false, fmt.Sprintf("the controller's bus connection was down at %s", l.At.UTC().Format(time.RFC3339))
	case now.Sub(l.ConnectedSince) < QuietAfter:
		return false, fmt.Sprintf("the controller is connected only since %s", l.ConnectedSince.UTC().Format(time.RFC3339))
	}
	heard, ok := l.Heard[node]
	return !ok || now.Sub(heard) > QuietAfter, ""
}
