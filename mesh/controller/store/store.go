package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Store is where the controller keeps its own state: every principal's
// secret, the mesh's authority, the key declarations are signed with, the
// credential documents it issues and the status it folds from EVENTS.
// What the nats container reads (nats.conf, the server's certificate and
// key) is not in it: those stay files the controller writes into the state
// directory's nats/ (statedir.Layout), whichever store holds the rest.
// docs/controller-store.md says why the store has this shape.
//
// Every method may wait on the store, so each takes a context first. An
// error wrapping ErrStoreUnavailable says the store could not take the
// call (a disk failing or full, a database down): nothing was changed, and
// the same call may succeed later, so a caller holding a message naks it
// with a delay rather than dropping it.
type Store interface {
	Reader
	// Create records a genesis, all or nothing, across a crash too: once
	// Secrets finds it, every part of it is there. A store that already
	// holds a genesis, or the leftovers of one, refuses with
	// ErrGenesisExists and is left as it was.
	Create(ctx context.Context, s State) error
	// Update runs fn and commits what it wrote through tx once it returns
	// nil; when it returns an error, nothing it wrote is kept and Update
	// returns that error. Updates run one at a time: fn reads what the
	// updates before it committed, and its own writes. tx is not to be used
	// after fn returns.
	//
	// How a commit survives a crash is the implementation's: PostgreSQL
	// commits one transaction; the file store makes each write atomic and
	// durable in the order fn made them, so a crash mid-commit leaves the
	// first of them done (FileStore).
	Update(ctx context.Context, fn func(tx Tx) error) error
}

// Reader reads the state. Outside an Update each read stands alone.
type Reader interface {
	// Secrets are every principal's password and hash, by user; ErrNoGenesis
	// when the store holds no genesis.
	Secrets(ctx context.Context) (Secrets, error)
	// Authority is the mesh's certificate authority; ErrNoGenesis when the
	// store holds no genesis.
	Authority(ctx context.Context) (*pki.CA, error)
	// DeclarationKey is the key every declaration is signed with
	// (wire.SignDeclaration); ErrNotFound in a state raised before
	// declarations were signed.
	DeclarationKey(ctx context.Context) (ed25519.PrivateKey, error)
	// Credential is the credential document issued to user, byte for byte
	// as its principal reads it; ErrNotFound when user holds none.
	Credential(ctx context.Context, user string) ([]byte, error)
	// Credentials are the users holding a credential document, sorted.
	Credentials(ctx context.Context) ([]string, error)
	// Status is the status folded so far (Failing sorted and never nil);
	// the empty status when none was ever put.
	Status(ctx context.Context) (Status, error)

	// Tokens are the enrolment tokens issued, spent or not, by id.
	Tokens(ctx context.Context) ([]Token, error)
	// Nodes are the nodes enrolled, by name.
	Nodes(ctx context.Context) ([]Node, error)
	// Applied is the ledger's entry of key (LedgerKey); ErrNotFound when
	// no message of that key was applied.
	Applied(ctx context.Context, key string) (Applied, error)
	// LedgerLen is how many entries the ledger holds.
	LedgerLen(ctx context.Context) (int, error)
	// Declared are the declarations the controller made, one per node (the
	// newest), by node.
	Declared(ctx context.Context) ([]wire.Declaration, error)
	// Description is the description last pushed, as it was pushed;
	// ErrNotFound before the first push.
	Description(ctx context.Context) ([]byte, error)
	// Reports are the last report of each node that reported, by node.
	Reports(ctx context.Context) ([]Reported, error)
	// Liveness is what the controller last wrote of the nodes' heartbeats;
	// the zero Liveness before it first did.
	Liveness(ctx context.Context) (Liveness, error)
	// DeadLetters are the dead letters folded from DEAD, oldest first.
	DeadLetters(ctx context.Context) ([]DeadLetter, error)
	// Refusals are the CONTROL messages refused; the zero Refusals
	// before the first.
	Refusals(ctx context.Context) (Refusals, error)
	// Persons are the persons issued (rollout.IssuePerson), by name.
	Persons(ctx context.Context) ([]Person, error)
	// Seats are the foundation seats held by servers adopted in place
	// (rollout.Adopt), by name.
	Seats(ctx context.Context) ([]Seat, error)
	// Compat is what the running controller last saw of the
	// compatibility broker's clients; ErrNotFound if it never looked.
	Compat(ctx context.Context) (Compat, error)
	// Cutover is the record of the last cutover begun (rollout.Cutover);
	// ErrNotFound before the first.
	Cutover(ctx context.Context) (Cutover, error)
	// Builds are the builds asked for and their outcomes, by id.
	Builds(ctx context.Context) ([]Build, error)
}

// Tx is what one Update reads and writes: its reads see its own writes at
// once, everyone else sees them once Update has committed. A write to a
// store that holds no genesis is refused with ErrNoGenesis: everything in
// a store belongs to the genesis that made it.
type Tx interface {
	Reader
	// PutSecrets replaces the secrets: a user not in s has none after.
	PutSecrets(ctx context.Context, s Secrets) error
	// PutDeclarationKey replaces the declaration key.
	PutDeclarationKey(ctx context.Context, key ed25519.PrivateKey) error
	// PutCredential replaces user's credential document.
	PutCredential(ctx context.Context, user string, doc []byte) error
	// PutCredentials replaces the credential document of every user in
	// docs, as PutCredential each would, and says which of them differed
	// from the one the store held (sorted): a composition's whole set in
	// a few round trips rather than two per user.
	PutCredentials(ctx context.Context, docs map[string][]byte) (changed []string, err error)
	// DeleteCredential revokes user's credential document; a user holding
	// none is no error.
	DeleteCredential(ctx context.Context, user string) error
	// PutStatus replaces the status.
	PutStatus(ctx context.Context, s Status) error
	// PutToken records a token, or replaces the one of its id.
	PutToken(ctx context.Context, t Token) error
	// PutNode records a node, or replaces the one of its name.
	PutNode(ctx context.Context, n Node) error
	// PutApplied enters a message in the ledger. It belongs in the Update
	// that commits the message's effect: both are kept, or neither.
	PutApplied(ctx context.Context, a Applied) error
	// PruneLedger forgets the entries of the messages that can come no
	// more: those of a CONTROL sequence below below (no longer in the
	// stream) applied before before (past the stream's duplicate window).
	// An entry without a sequence (Seq 0: a token's answer, not a
	// message's) is kept. It says how many it forgot; its cost is theirs,
	// not the ledger's (docs/controller-store.md, "The ledger").
	PruneLedger(ctx context.Context, below uint64, before time.Time) (int, error)
	// PutDeclared records a node's declaration, replacing its older one.
	PutDeclared(ctx context.Context, d wire.Declaration) error
	// DeleteDeclared forgets a node's declaration (a node pushed away); a
	// node holding none is no error.
	DeleteDeclared(ctx context.Context, node string) error
	// PutDescription records the description pushed.
	PutDescription(ctx context.Context, yaml []byte) error
	// PutReport records a node's report, replacing its older one.
	PutReport(ctx context.Context, r Reported) error
	// PutLiveness replaces the liveness record.
	PutLiveness(ctx context.Context, l Liveness) error
	// PutDeadLetter records a dead letter, replacing the one of its key
	// (DeadLetter.Key: its DEAD sequence, or its consumer and event id).
	PutDeadLetter(ctx context.Context, d DeadLetter) error
	// PutRefusals replaces the refusals record.
	PutRefusals(ctx context.Context, r Refusals) error
	// PutPerson records a person issued, or replaces the one of its name.
	PutPerson(ctx context.Context, p Person) error
	// PutSeat records a seat adopted, or replaces the one of its name.
	PutSeat(ctx context.Context, s Seat) error
	// PutCompat replaces what was seen of the compatibility broker.
	PutCompat(ctx context.Context, c Compat) error
	// PutCutover replaces the cutover's record.
	PutCutover(ctx context.Context, c Cutover) error
	// DeletePerson forgets a person (revoked); one not issued is no error.
	DeletePerson(ctx context.Context, name string) error
	// PutBuild records a build, or replaces the one of its id.
	PutBuild(ctx context.Context, b Build) error
}

// SubTx is a Tx that can undo a part of itself: what the CONTROL loop
// needs to apply a batch of messages in one commit (one fsync, one
// PostgreSQL commit) while a message that fails keeps nothing of its own
// and the others keep theirs. Both stores' Tx are one.
type SubTx interface {
	Tx
	// Sub runs fn as a part of the transaction: what fn wrote through
	// the Tx is kept when it returns nil, and undone, the rest of the
	// transaction kept, when it returns an error, which Sub returns.
	Sub(ctx context.Context, fn func() error) error
}

// State is what genesis puts into a store: everything the controller
// minted but what the nats container reads.
type State struct {
	Secrets        Secrets
	Authority      *pki.CA
	DeclarationKey ed25519.PrivateKey
	// Credentials are the credential documents, by user.
	Credentials map[string][]byte
}

// Sentinel errors the CLI and callers branch on.
var (
	// ErrStoreUnavailable is wrapped by every error of a store that could
	// not take a call now: the call changed nothing and may succeed later.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrNotFound is wrapped when the store holds no such record: a
	// credential of a user, a declaration key.
	ErrNotFound = errors.New("not in the store")
	// ErrGenesisExists refuses a second genesis over an existing one.
	ErrGenesisExists = errors.New("state directory already holds a genesis")
	// ErrNoGenesis means apply, run or a write found no genesis.
	ErrNoGenesis = errors.New("state directory holds no genesis")
)
