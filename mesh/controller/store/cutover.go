package store

import (
	"fmt"
	"maps"
	"time"
)

// CutoverPhase is where a cutover stands (docs/decisions/0013).
type CutoverPhase string

// The phases, in the order a cutover goes through them; Stopped ends a
// cutover that prepare refused, with the mesh left on the bus it was on.
const (
	// CutoverCompose: the new bus's server checked (every principal logs
	// in; the streams and consumers asserted there).
	CutoverCompose CutoverPhase = "compose"
	// CutoverPrepare: every node declared to prove it reaches the new bus
	// with its new credential, nothing moved.
	CutoverPrepare CutoverPhase = "prepare"
	// CutoverSwitch: the credentials are the new bus's, every node is
	// declared to switch, and the controller listens on both buses until
	// every node is heard on the new one.
	CutoverSwitch CutoverPhase = "switch"
	// CutoverRetire: every node heard on the new bus; the mesh's side of
	// the old one is being removed.
	CutoverRetire CutoverPhase = "retire"
	// CutoverDone: the mesh is on the new bus and nothing of it is left
	// on the old one.
	CutoverDone CutoverPhase = "done"
	// CutoverStopped: prepare found a node that could not move; nothing
	// switched, and the declarations no longer ask anyone to move.
	CutoverStopped CutoverPhase = "stopped"
)

// Ended says whether the phase ends a cutover.
func (p CutoverPhase) Ended() bool { return p == CutoverDone || p == CutoverStopped }

// Cutover is the record of the mesh's move from one bus to another
// (design 25 §9 step 5): one document, replaced whole at each step, so
// that a controller killed anywhere resumes from what it says.
type Cutover struct {
	// Generation counts the cutovers begun, from 1; a cutover stopped and
	// begun again is the next one.
	Generation uint64 `json:"generation"`
	// From and To are the buses (wire.BusAMQP, wire.BusNATS).
	From string `json:"from"`
	To   string `json:"to"`
	// Phase is where it stands, since PhaseSince.
	Phase      CutoverPhase `json:"phase"`
	PhaseSince time.Time    `json:"phase_since"`
	Begun      time.Time    `json:"begun"`
	// Within bounds how long prepare waits for every node, and how long
	// switch waits before a node not heard on To is said overdue.
	Within time.Duration `json:"within"`
	// Target is where To's server is dialled and the certificate fingerprint it
	// presented when the cutover began; Old the same of From's, for
	// the controller's connection to the nodes not moved yet.
	Target BusTarget `json:"target"`
	Old    BusTarget `json:"old"`
	// Nodes are the nodes the cutover moves, by name.
	Nodes map[string]CutoverNode `json:"nodes"`
	// Stopped says why a cutover stopped (Phase CutoverStopped), naming
	// the nodes.
	Stopped string `json:"stopped,omitempty"`
	// Blocked is what the controller last could not do in this phase (a
	// server not answering, a node overdue), "" once it could.
	Blocked string `json:"blocked,omitempty"`
	// Committed is when the switch was committed: every credential on To,
	// every node declared to switch.
	Committed time.Time `json:"committed,omitzero"`
	// Moved is when what was left in the consumers' queues on From was
	// moved onto To, in retire, before anything of From is removed.
	Moved time.Time `json:"moved,omitzero"`
	// Ended is when it reached CutoverDone or CutoverStopped.
	Ended time.Time `json:"ended,omitzero"`
}

// BusTarget is where a bus's server is dialled and which certificate it
// presents.
type BusTarget struct {
	Addr        string `json:"addr"`
	Fingerprint string `json:"fingerprint"`
}

// CutoverNode is one node's part in a cutover.
type CutoverNode struct {
	// Prepare and Switch are the revisions of the node's declarations
	// asking it to prepare and to switch (0 until declared).
	Prepare uint64 `json:"prepare,omitempty"`
	Switch  uint64 `json:"switch,omitempty"`
	// Prepared is when the node reported it had applied Prepare (it
	// reached To with its new credential); Refused why it could not.
	Prepared time.Time `json:"prepared,omitzero"`
	Refused  string    `json:"refused,omitempty"`
	// Switched is when the node was first heard on To having applied
	// Switch.
	Switched time.Time `json:"switched,omitzero"`
}

// CheckCutover refuses a record that could not have been begun.
func CheckCutover(c Cutover) error {
	if c.Generation == 0 || c.From == "" || c.To == "" || c.Phase == "" || c.Begun.IsZero() {
		return fmt.Errorf("put cutover: a generation, the buses, a phase and when it began are required, got generation %d %q→%q phase %q", c.Generation, c.From, c.To, c.Phase)
	}
	return nil
}

func copyCutover(c Cutover) Cutover {
	c.Nodes = maps.Clone(c.Nodes)
	return c
}
