// Package plane is the control plane's seam: what the controller, the
// host and the build path's programs (the builder, a source repository)
// ask of the bus, as small role interfaces that speak of the mesh's
// own things — CONTROL's messages, a node's signed declaration, a report,
// a build request, a sealed credential, an artifact — and never of a bus
// library's. The NATS implementation is package natsplane, the AMQP one
// amqpplane; package linktest is the contract both keep, its test bodies
// run against the real servers. A program picks its implementation by its
// credential's scheme (package buses), as the SDK picks a module's
// binding; packages controller, host and build import no bus library.
//
// # For the author of an implementation
//
// An implementation moves bytes and settles deliveries when told to; it
// decides nothing about them. Signing and checking a declaration, which
// reply an enrolment may name, the ledger that makes a redelivery apply
// once, the order of a node's declarations (the signed revision): all of
// that is the controller's and the host's, once, for both buses. What an
// implementation owes them is in each method's comment: above all, what is
// confirmed is held by the bus (a report, a control message, a build
// request), a held delivery comes again no sooner than asked and without
// holding up those behind it, and nothing of one principal's reaches
// another's queue or subject by any route the bus has.
//
// A Position is where the bus keeps a message (NATS: its stream
// sequence). It is 0 where the bus keeps none (AMQP); callers must not
// order anything by it across buses: it serves pruning and the text of a
// refusal.
package plane

import (
	"context"
	"errors"
	"time"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Sentinel errors an implementation wraps; callers branch on them.
var (
	// ErrNoDeclaration: the bus holds no declaration for the node yet.
	ErrNoDeclaration = errors.New("the bus holds no declaration for this node")
	// ErrNotSent: an enrolment's request did not reach CONTROL (the bus
	// away, the token's login not taken yet); asking again may help.
	ErrNotSent = errors.New("the enrolment request did not reach the controller")
	// ErrNoAnswer: the request reached CONTROL, and the connection was
	// interrupted with no answer read; asking again with the same sealing
	// key is answered from the controller's ledger.
	ErrNoAnswer = errors.New("the connection was interrupted before the enrolment was answered")
	// ErrLoginRefused: the bus refused the credential's login (a token
	// not composed yet, or spent, expired, revoked).
	ErrLoginRefused = errors.New("the bus refused the login")
	// ErrMissing: an exchange, queue or stream the mesh declares is not on
	// the bus; the caller names it and waits, and creates nothing.
	ErrMissing = errors.New("not on the bus")
	// ErrDrift: an object on the bus differs from what the mesh needs on
	// a field the bus cannot update in place; an operator must.
	ErrDrift = errors.New("drift that cannot be corrected in place")
	// ErrUnsupported: this bus does not carry the flow (yet); the error
	// names the flow.
	ErrUnsupported = errors.New("this bus does not carry it")
)

// ---- The host's side.

// Host is a node's host connected as itself.
type Host interface {
	NodeReader
	Reporter
	Heartbeat
	CredentialAsker
	ArtifactFetcher
	// Close ends the connection.
	Close() error
}

// Declared is a node's newest declaration as the bus holds it: the body
// and the controller's signature over it, unchecked (the host checks
// them), and where the bus keeps it.
type Declared struct {
	Body      []byte
	Signature string
	Position  uint64
	// Where says where it was read, for a refusal's text ("NODES
	// sequence 12", "queue node.node-a").
	Where string
}

// NodeReader reads a node's newest declaration.
type NodeReader interface {
	// Newest is the newest declaration the bus holds for node, or the
	// last one it gave this reader if it keeps none readable again (a
	// queue read empty); ErrNoDeclaration before the first. A reader
	// never gets one older than one it was given (newest only).
	Newest(ctx context.Context, node string) (Declared, error)
}

// Reporter sends a node's reports into CONTROL.
type Reporter interface {
	// Report returns once CONTROL holds the report (PubAck, publisher
	// confirm). id is its message id: the same report sent twice is
	// kept once within the bus's duplicate window, and by the
	// controller's ledger after.
	Report(ctx context.Context, node, id string, body []byte) error
}

// Heartbeat says a node is alive; nothing keeps it.
type Heartbeat interface {
	Alive(ctx context.Context, node string, body []byte) error
}

// CredentialAsker asks the controller for the node's modules'
// credentials (the answer is sealed; the host opens it).
type CredentialAsker interface {
	Credentials(ctx context.Context, node string) (answer []byte, err error)
}

// ArtifactFetcher fetches an artifact by its digest and size; the bytes
// are checked against both (wrapping artifact.ErrDigest, ErrMissing,
// ErrSize).
type ArtifactFetcher interface {
	Artifact(ctx context.Context, digest string, size int64) ([]byte, error)
}

// Enroller claims a token for a node: it sends request (the claim,
// wire.EnrolRequest, without its Reply, which the implementation names:
// an inbox or queue the token's user alone reads) into CONTROL until the
// bus confirms it, and returns the controller's answer, unopened. It waits
// from the first send, as long as ctx allows: the answer may come after
// the controller held the claim for as long as its store was away. An
// answer ends the wait whether or not the confirmation came. Errors wrap
// ErrLoginRefused, ErrNotSent or ErrNoAnswer as their cause is.
type Enroller interface {
	Enrol(ctx context.Context, request func(reply string) []byte) (answer []byte, err error)
}

// ---- The controller's side.

// Controller is the controller connected to the bus.
type Controller interface {
	Asserter
	ControlFeed
	Answerer
	BuildQueue
	DeclarationKeeper
	StatusFeed
	DeadFeed
	HeartbeatFeed
	CredentialDesk
	ArtifactDesk
	// Close ends the connections.
	Close() error
}

// Asserted says what one assertion of the bus's objects (streams and
// consumers; exchanges and queues) changed. Against a bus that already
// matches, nothing.
type Asserted struct {
	Created, Corrected, Deleted []string
}

// Changed reports whether the assertion changed anything.
func (a Asserted) Changed() bool { return len(a.Created)+len(a.Corrected)+len(a.Deleted) > 0 }

// Asserter makes the bus's objects what the mesh needs, idempotently:
// what is missing is created, what drifted and can be corrected is, and
// drift that cannot be is returned (wrapping ErrDrift) with nothing
// changed.
type Asserter interface {
	Assert(ctx context.Context, m *meshdesc.Mesh) (Asserted, error)
}

// ControlMsg is one delivery of CONTROL to the controller, its only
// consumer.
type ControlMsg interface {
	// Subject is the wire subject it was sent on (wire.SubjectEnrol,
	// wire.NodeReport(node), …); on AMQP, its routing key mapped back.
	Subject() string
	// ID is the publisher's message id, "" if it gave none.
	ID() string
	// Position is where CONTROL keeps it (0: the bus keeps none).
	Position() uint64
	// Attempt is which delivery this is, from 1.
	Attempt() int
	Data() []byte
	// Ack settles it as done and waits for the bus to confirm; AckLater
	// settles it without waiting, confirmed by the feed's Flush.
	Ack(ctx context.Context) error
	AckLater() error
	// Hold asks for it again no sooner than delay, without holding up
	// the deliveries behind it.
	Hold(delay time.Duration) error
	// Term refuses it for good, with the reason.
	Term(reason string) error
}

// ControlFeed is CONTROL as its consumer sees it.
type ControlFeed interface {
	// Consume delivers CONTROL's messages to deliver, from one goroutine,
	// at most max unsettled at once, until stop; stop returns once
	// deliver is no longer called. What was fetched and not settled comes
	// again.
	Consume(ctx context.Context, max int, deliver func(ControlMsg)) (stop func(), err error)
	// Flush waits until the settlements and answers sent so far are
	// confirmed by the bus.
	Flush(ctx context.Context) error
	// Prunable is what the ledger may forget: entries of messages below
	// position below applied longer ago than window (the bus's duplicate
	// window; on a bus keeping no positions, below is the highest).
	Prunable(ctx context.Context) (below uint64, window time.Duration, err error)
}

// Answerer answers an enrolment on the reply its payload named.
type Answerer interface {
	// CheckEnrolReply says whether reply, named by a claim of token, is
	// that token's own inbox or queue on this bus (wire.CheckEnrolReply,
	// wire.CheckEnrolQueue): the answer carries a credential, and the
	// controller writes where it is told only after this check.
	CheckEnrolReply(token, reply string) error
	// Answer publishes body on reply and returns once the bus took it
	// (on NATS, once it is written: Flush confirms).
	Answer(ctx context.Context, reply string, body []byte) error
}

// BuildQueue asks the builders for a build: held until one builder takes
// it, at least once; id is its message id.
type BuildQueue interface {
	RequestBuild(ctx context.Context, id string, body []byte) error
}

// SignedDeclaration is a node's declaration with the controller's
// signature over it.
type SignedDeclaration struct {
	Node      string
	Body      []byte
	Signature string
}

// DeclarationKeeper keeps each node's newest declaration on the bus: Keep
// puts them and keeps them so (on NATS, where a reply could once write
// into NODES, it also watches and repairs: docs/decisions/0001); Set
// replaces the set kept: the description's every node.
type DeclarationKeeper interface {
	Keep(ctx context.Context, decls []SignedDeclaration) (Keeper, error)
}

// Keeper is a running DeclarationKeeper.
type Keeper interface {
	// Set makes decls the ones kept, every node's: a node left out is no
	// longer in the description, and its declaration is removed from the
	// bus.
	Set(ctx context.Context, decls []SignedDeclaration) error
	Stop()
}

// EventMsg is one provisioner event delivered to the controller's status
// consumer.
type EventMsg interface {
	// Position is where EVENTS keeps it (0: the bus keeps none).
	Position() uint64
	// Subject is the wire subject it was emitted on (on AMQP, its routing
	// key on the events exchange mapped back); what did not come from a
	// provider's emit has no event subject.
	Subject() string
	// Header is its envelope's headers, x-event-id among them.
	Header() map[string][]string
	Data() []byte
	// Ack settles it as folded and waits for the bus to confirm, where the
	// bus confirms acknowledgements.
	Ack(ctx context.Context) error
	// Hold asks for it again no sooner than delay; the events behind it
	// wait (the status is a fold in order).
	Hold(delay time.Duration) error
	// Term refuses it for good: it does not come again.
	Term() error
}

// EventsOrigin identifies the events the status is folded from: when the
// bus's EVENTS was made, and its last position. The zero EventsOrigin is a
// bus that keeps no positions (AMQP): there is no stream to compare the
// status with; the events come from the controller's own queue one at a
// time, in the order the providers emitted them, and the only one handed
// again is the last handed over, known by its event id
// (store.Status.Folded).
type EventsOrigin struct {
	Created time.Time
	Last    uint64
}

// StatusFeed delivers the provisioner events (wire.ProvisionerStatusEvents
// of any provider, nothing else) to the controller's status, one at a
// time, in the order emitted: deliver is not called again before the
// delivery in hand is settled, and a held one comes again before those
// behind it. What is not settled when the feed stops comes again.
type StatusFeed interface {
	EventsOrigin(ctx context.Context) (EventsOrigin, error)
	FollowEvents(ctx context.Context, deliver func(EventMsg)) (stop func(), err error)
}

// Dead is a dead letter as the bus recorded it: which consumer gave up on
// which event after how many deliveries. On a bus that keeps no positions
// (AMQP) Position and EventPos are 0, and the letter is known by its
// consumer and event id.
type Dead struct {
	Position uint64
	// Consumer is the module's consumer as NATS names it
	// (wire.ModuleConsumer), whichever the bus.
	Consumer   string
	EventPos   uint64
	Subject    string
	EventID    string
	Deliveries int
	At         time.Time
}

// DeadFeed follows the dead letters after position after, in order, one
// at a time: a deliver that has not returned holds the ones after it.
// deliver returns nil once the letter is recorded; a bus that takes
// letters away as they are read (AMQP, where after means nothing) takes
// it then, and keeps it for the next follower otherwise, so it comes
// again. What the bus holds that is not a dead letter is passed over.
type DeadFeed interface {
	FollowDead(ctx context.Context, after uint64, deliver func(Dead) error) (stop func(), err error)
}

// Backlog is what the controller's own queues hold on a bus that keeps
// no positions (AMQP: its status queue and the dead letters'), not yet
// handed to it. A bus that keeps these in streams has no Backlog: the
// streams outlive the controller's reading of them. A cutover asks it
// before it retires the old bus, which removes what they still hold.
type Backlog interface {
	Backlog(ctx context.Context) (int, error)
}

// HeartbeatFeed hears the nodes' heartbeats.
type HeartbeatFeed interface {
	// Hear calls heard with each heartbeat's node and body until stop.
	Hear(ctx context.Context, heard func(node string, body []byte)) (stop func(), err error)
	// Connected says whether the controller is connected right now.
	Connected() bool
}

// CredentialDesk answers the hosts' requests for their modules'
// credentials: answer is called with the node the request came from,
// which the bus vouches for (only that node's host may ask as it), and
// its bytes go back to that host alone.
type CredentialDesk interface {
	ServeCredentials(ctx context.Context, answer func(ctx context.Context, node string) []byte) (stop func(), err error)
}

// ArtifactDesk hands the hosts the artifacts their declarations name,
// where the bus cannot narrow a host's reads to them itself (AMQP, where
// the controller copies the chunks into the host's own queue:
// docs/decisions/0011). On NATS a host's grant names its artifacts'
// chunks and it reads them itself: ServeArtifacts serves nothing there.
type ArtifactDesk interface {
	// ServeArtifacts answers each host's request for an artifact until
	// stop. allowed is asked with the node the request came from, which
	// the bus vouches for, and the digest asked; it returns the
	// artifact's size if that node's declaration names it, and an error
	// saying why not otherwise (the host hears the reason).
	ServeArtifacts(ctx context.Context, allowed func(ctx context.Context, node, digest string) (size int64, err error)) (stop func(), err error)
}

// Pusher sends an operator's push into CONTROL and returns where CONTROL
// holds it once it does.
type Pusher interface {
	Push(ctx context.Context, id string, body []byte) (Position uint64, err error)
	Close() error
}
