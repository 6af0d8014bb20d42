package plane

import (
	"context"
	"errors"
	"time"
)

// ---- The build path's side: a builder and a source repository
// (docs/decisions/0006).

// Builder is a builder connected as itself: it takes the controller's
// build requests one at a time, fetches the revision asked for, stores the
// artifact and says how the build went.
type Builder interface {
	BuildFeed
	RevisionFetcher
	ArtifactStore
	BuildReporter
	// Close ends the connection. A request taken and not settled is the
	// bus's to give to another builder (at once on AMQP, after the ack
	// wait on NATS): a builder killed does no more.
	Close() error
}

// BuildMsg is one build request delivered to a builder: ControlMsg's
// shape. While it is neither settled nor its builder closed, it is that
// builder's alone, however long the build takes (on NATS the
// implementation says it is in progress within the ack wait).
type BuildMsg interface {
	// ID is the request's message id (the build's id, as RequestBuild
	// was given it).
	ID() string
	// Position is where the bus keeps it (0: the bus keeps none).
	Position() uint64
	// Attempt is which delivery this is, from 1.
	Attempt() int
	Data() []byte
	// Ack settles it as built and waits for the bus to confirm where it
	// confirms acknowledgements.
	Ack(ctx context.Context) error
	// Hold gives it back, to come again no sooner than delay (at once
	// for 0), to this builder or another.
	Hold(delay time.Duration) error
	// Term refuses it for good, with the reason.
	Term(reason string) error
}

// BuildFeed hands a builder the build requests, at most one unsettled at a
// time.
type BuildFeed interface {
	// NextBuild waits for one build request until ctx ends; nil, nil
	// when none came by then. The builders' queue or consumer not on the
	// bus yet (the controller creates it) is ErrMissing, naming it: the
	// caller waits and asks again. A builder closed is link.ErrClosed.
	NextBuild(ctx context.Context) (BuildMsg, error)
}

// RevisionFetcher asks a source repository for one revision.
type RevisionFetcher interface {
	// FetchRevision sends request (wire.FetchRequest) to repository
	// repo and returns its answer (wire.FetchAnswer), unchecked. Nobody
	// answering for repo wraps ErrNoAnswerer: the repository is away, and
	// the build is not the worse for it.
	FetchRevision(ctx context.Context, repo string, request []byte) (answer []byte, err error)
}

// ErrNoAnswerer: nobody answers for the repository asked.
var ErrNoAnswerer = errors.New("nobody answers for the repository")

// ArtifactStore keeps a built artifact where the hosts fetch it
// (ArtifactFetcher).
type ArtifactStore interface {
	// PutArtifact stores data and returns its digest (wire.Digest) and
	// how many chunks hold it, once the bus holds every chunk. Storing
	// the same bytes again changes nothing.
	PutArtifact(ctx context.Context, data []byte) (digest string, chunks int, err error)
}

// BuildReporter says how a build went.
type BuildReporter interface {
	// Built sends a build's outcome (wire.Built) into CONTROL on
	// wire.SubjectBuilt with message id id, and returns once CONTROL
	// holds it (PubAck, publisher confirm).
	Built(ctx context.Context, id string, body []byte) error
}

// Source is a source repository connected as itself.
type Source interface {
	SourceAnnouncer
	RevisionServer
	Close() error
}

// SourceAnnouncer tells the controller of a new revision.
type SourceAnnouncer interface {
	// Announce sends a repository's announcement (wire.SourceChange)
	// into CONTROL on wire.SourceChanged(repo) with message id id, and
	// returns once CONTROL holds it.
	Announce(ctx context.Context, repo, id string, body []byte) error
}

// Fetch is one builder's fetch of a revision, for a repository to
// answer.
type Fetch interface {
	// Data is the request (wire.FetchRequest), unchecked.
	Data() []byte
	// Answer sends the answer (wire.FetchAnswer) to the builder that
	// asked, and to nobody else.
	Answer(body []byte) error
}

// RevisionServer answers the builders' fetches of a repository's
// revisions.
type RevisionServer interface {
	// ServeFetches hands each fetch of repo to serve until stop, from one
	// goroutine: serve must not wait for its answer (it answers from a
	// goroutine of its own when it is slow), or it holds up the next.
	// Two servers of one repository answer each fetch once. A fetch whose
	// answer would go anywhere but to a builder is not handed over.
	ServeFetches(ctx context.Context, repo string, serve func(Fetch)) (stop func(), err error)
}
