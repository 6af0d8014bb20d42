package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// The registry is what the living mesh adds to the store: the enrolment
// tokens issued, the nodes enrolled, and the ledger of the CONTROL
// messages applied. docs/controller-store.md says how each store keeps it.

// Token is an enrolment token the controller issued (mesh-controller token
// issue): one node may enrol with it, once, before it expires. Its secret
// is the enrolment user's password, kept in Secrets under
// wire.EnrolUser(ID) while the token is unspent.
type Token struct {
	ID      string    `json:"id"`
	Node    string    `json:"node"`
	Issued  time.Time `json:"issued"`
	Expires time.Time `json:"expires"`
	// Spent is when a node enrolled with it; zero while unspent.
	Spent time.Time `json:"spent,omitzero"`
	// Grace is how long its user stays on the bus once it is spent or
	// expired (Leaves), as it was issued (token issue --grace); zero: the
	// grace every composer is given (SpentTokenGrace by default). Kept
	// with the token, so that every process composing agrees on it.
	Grace time.Duration `json:"grace,omitzero"`
}

// Usable reports whether the token may still be claimed at now.
func (t Token) Usable(now time.Time) bool { return t.Spent.IsZero() && now.Before(t.Expires) }

// SpentTokenGrace is how long a spent token's user stays in the server's
// configuration. The answer goes out within milliseconds of the spend,
// but a composition made meanwhile (the loop's composer, another
// process's apply, the start of a controller killed before it answered)
// would otherwise revoke the user and close its connection with the
// answer not yet delivered; within the grace, a node whose answer was
// lost asks again with its key and is answered from the ledger. The user
// can do nothing it could not before the spend, and a claim with another
// key is refused. An unspent token's user stays as long after its expiry,
// so that a claim made at its last moment gets its refusal.
// (rollout.Options.SpentTokenGrace sets another.)
const SpentTokenGrace = 30 * time.Second

// Composed reports whether the token's user belongs in the configuration
// at now: until grace after it left use, spent or expired (Leaves).
func (t Token) Composed(now time.Time, grace time.Duration) bool {
	return now.Before(t.Leaves(grace))
}

// Leaves is when the token's user leaves the configuration: its grace
// (its own, or grace where it was issued with none) after the token was
// spent, or, unspent, after it expired, so that a claim made at its last
// moment is still answered, with its refusal ("expired at"), rather than
// cut off by the reload.
func (t Token) Leaves(grace time.Duration) time.Time {
	if t.Grace > 0 {
		grace = t.Grace
	}
	if !t.Spent.IsZero() {
		return t.Spent.Add(grace)
	}
	return t.Expires.Add(grace)
}

// Node is a node that enrolled: the key its credentials are sealed to.
type Node struct {
	Name string `json:"name"`
	// SealingKey is the node's public sealing key (seal.EncodePublic).
	SealingKey string    `json:"sealing_key"`
	Enrolled   time.Time `json:"enrolled"`
	// Token is the token it enrolled with.
	Token string `json:"token"`
}

// Applied is one entry of the ledger: a CONTROL message whose effect is
// committed, by its key (LedgerKey), with what answering it again needs.
type Applied struct {
	Key string    `json:"key"`
	At  time.Time `json:"at"`
	// Seq is the message's sequence in CONTROL, by which the ledger is
	// pruned (PruneLedger); 0 for an entry that is not a message's (the
	// answer a token was spent with), which is kept.
	Seq     uint64 `json:"seq,omitempty"`
	Outcome []byte `json:"outcome,omitempty"`
}

// LedgerKey is the ledger's key of a CONTROL message on subject: its
// publisher's message id when it has one (a duplicate publish is the same
// message), else its stream sequence (a redelivery is the same message).
// A message id is the publisher's to choose, so it is scoped by subject: a
// publisher can make its id collide only with its own messages', never
// with another node's report or an enrolment.
func LedgerKey(subject, msgID string, streamSeq uint64) string {
	if msgID != "" {
		return subject + " id:" + msgID
	}
	return fmt.Sprintf("seq:%d", streamSeq)
}

// Reported is the last report the controller took from a node.
type Reported struct {
	Report wire.Report `json:"report"`
	// Seq is its sequence in CONTROL; Received when the controller took it.
	Seq      uint64    `json:"seq"`
	Received time.Time `json:"received"`
	// Bus is the bus the report came on (wire.BusNATS, wire.BusAMQP); ""
	// from a controller older than the cutover.
	Bus string `json:"bus,omitempty"`
}

// registry is the file store's registry.json: the registry whole as of
// its journal's start (fileregistry.go).
type registry struct {
	// Version is registryVersion since issue 18; 0 before.
	Version     int                `json:"version,omitempty"`
	Tokens      []Token            `json:"tokens"`
	Nodes       []Node             `json:"nodes"`
	Ledger      []Applied          `json:"ledger"`
	Declared    []wire.Declaration `json:"declared"`
	Description []byte             `json:"description,omitempty"`
	Reports     []Reported         `json:"reports"`
	Liveness    Liveness           `json:"liveness"`
	Dead        []DeadLetter       `json:"dead"`
	Refusals    Refusals           `json:"refusals"`
	Persons     []Person           `json:"persons"`
	Builds      []Build            `json:"builds"`
	Seats       []Seat             `json:"seats,omitempty"`
	Compat      *Compat            `json:"compat,omitempty"`
	Cutover     *Cutover           `json:"cutover,omitempty"`
}

func parseRegistry(data []byte, path string) (registry, error) {
	var r registry
	if err := json.Unmarshal(data, &r); err != nil {
		return registry{}, fmt.Errorf("read registry %s: %w", path, err)
	}
	return r, nil
}

func (r registry) marshal() []byte {
	slices.SortFunc(r.Tokens, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(r.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.Persons, func(a, b Person) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.Builds, func(a, b Build) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(r.Ledger, func(a, b Applied) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(r.Declared, func(a, b wire.Declaration) int { return strings.Compare(a.Node, b.Node) })
	SortDeadLetters(r.Dead)
	slices.SortFunc(r.Reports, func(a, b Reported) int { return strings.Compare(a.Report.Node, b.Report.Node) })
	b, _ := json.MarshalIndent(r, "", "  ")
	return append(b, '\n')
}

// The checks every store makes of a record before it keeps it.

// CheckToken refuses a token without an id, a node or an expiry.
func CheckToken(t Token) error {
	if t.ID == "" || t.Node == "" || t.Expires.IsZero() {
		return fmt.Errorf("put token: id, node and expiry are required, got %+v", t)
	}
	if t.Grace < 0 {
		return fmt.Errorf("put token %s: a grace of %s is below zero", t.ID, t.Grace)
	}
	return nil
}

// CheckPerson refuses a person without a valid name, a grant or the key
// its credential is sealed to.
func CheckPerson(p Person) error {
	if wire.CheckName(p.Name) != nil || len(p.Tools) == 0 || p.SealingKey == "" || p.Issued.IsZero() {
		return fmt.Errorf("put person: a name, tools, a sealing key and when it was issued are required, got %+v", p)
	}
	return nil
}

// CheckDeclared refuses a declaration without a node or a revision.
func CheckDeclared(d wire.Declaration) error {
	if err := wire.CheckName(d.Node); err != nil || d.Revision == 0 {
		return fmt.Errorf("put declaration: a node name and a revision above 0 are required, got %+v", d)
	}
	return nil
}

// CheckReported refuses a report without a node or an id.
func CheckReported(r Reported) error {
	if err := wire.CheckName(r.Report.Node); err != nil || r.Report.ID == "" {
		return fmt.Errorf("put report: a node and an id are required, got %+v", r.Report)
	}
	return nil
}

// CheckNode refuses a node without a name or a sealing key.
func CheckNode(n Node) error {
	if n.Name == "" || n.SealingKey == "" {
		return fmt.Errorf("put node: name and sealing key are required, got %+v", n)
	}
	return nil
}

// CheckDeadLetter refuses a dead letter without its consumer, or without
// both its DEAD sequence and its event id: nothing would know it again.
func CheckDeadLetter(d DeadLetter) error {
	if d.Consumer == "" || (d.DeadSeq == 0 && d.EventID == "") {
		return fmt.Errorf("put dead letter: a consumer, and a DEAD sequence or an event id, are required, got %+v", d)
	}
	return nil
}

// CheckRefusals refuses a refusals record holding more than
// MaxRefusalsKept, or a refusal without its kind or its key.
func CheckRefusals(r Refusals) error {
	if len(r.Last) > MaxRefusalsKept {
		return fmt.Errorf("put refusals: %d kept, more than %d", len(r.Last), MaxRefusalsKept)
	}
	for _, x := range r.Last {
		if x.Kind == "" || x.Key == "" {
			return fmt.Errorf("put refusals: a kind and a key are required, got %+v", x)
		}
	}
	return nil
}
