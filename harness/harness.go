package harness

import (
	"context"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/mesh/wire"
)

// Read this file first. Mesh is the harness as a bed's steps see it: a
// cluster raised in containers, its members by name, the faults that
// break them, and the ways to look at it from outside. The steps hold a
// Mesh and nothing else of the harness's: no Docker, no testcontainers,
// no host path of the controller's state (controller.Layout spells that,
// here). *Cluster, raised by Session.RaiseGenesis on testcontainers-go,
// is the one implementation.
type Mesh interface {
	// Members are the long-running containers by name (MemberBus,
	// MemberController, the store, a host by its node); Member is one of
	// them, or ErrUnknownMember naming the valid ones.
	Members() []string
	Member(name string) (Member, error)

	// Faults (faults.go, one file each): Inject applies one to a member
	// and returns once it has taken effect; Undo removes it and returns
	// once the member is healthy again (ErrUndo if it cannot be: the
	// cluster is not to be reused); UndoAll undoes whatever is left, as
	// teardown does. FaultNames are those a member can take.
	FaultNames(member string) []string
	Inject(ctx context.Context, member, fault string) (time.Duration, error)
	Undo(ctx context.Context, member string) (time.Duration, error)
	Fault(member string) string
	UndoAll(ctx context.Context) error

	// Principals: a user's credential as the controller holds it (asked
	// of the controller, whichever store it keeps), and the host address
	// the bus is reached at from here (ask again after the bus was
	// restarted).
	Credential(ctx context.Context, user string) (wire.Credential, error)
	BusAddress(ctx context.Context) (string, error)

	// Enrolment (design 25 §6): IssueToken has the controller issue a
	// token for node (its user live at once); Enrolment is how a host
	// member joined — the token the harness issued it, kept so that a bed
	// can present it again, and when it was issued and the host was
	// connected as itself.
	IssueToken(ctx context.Context, node string) (wire.Credential, []byte, error)
	// IssueTokenFor is IssueToken for a token that may be claimed for
	// ttl (the controller's default when zero).
	IssueTokenFor(ctx context.Context, node string, ttl time.Duration) (wire.Credential, []byte, error)
	// IssuePerson has the controller issue the person name a user that
	// may call tools (every declared tool when admin), its credential
	// sealed to key (seal.EncodePublic): what mesh-controller person issue
	// printed (wire.SealedCredential).
	IssuePerson(ctx context.Context, name string, tools []string, admin bool, key string) ([]byte, error)
	// RevokePerson has the controller revoke the person name.
	RevokePerson(ctx context.Context, name string) error
	// Commit has the source repository repo commit revision of module
	// with content and announce it (source commit, in its container).
	Commit(ctx context.Context, repo, module, revision, content string) (string, error)
	Enrolment(node string) (Enrolment, error)

	// QueryStore reads the controller's PostgreSQL store itself (psql in
	// the store member's container): rows of tab-separated columns. Only
	// where the topology has a store.
	QueryStore(ctx context.Context, sql string) ([][]string, error)

	// Probe runs the one-shot observer on a network (Private, Outside).
	Probe(ctx context.Context, network string, args ...string) (ProbeResult, error)

	// The controller's own commands and files, as an operator has them:
	// RunController runs mesh-controller with args in a container of its
	// own beside the state; StageFile puts a file where it reads the
	// description; the nats container's watched configuration, read and
	// written in place.
	RunController(ctx context.Context, args ...string) (output string, exit int, err error)
	StageFile(hostPath, name string) error
	NATSConfigFile() string
	ReadNATSConfig() ([]byte, error)
	WriteNATSConfig(content []byte) error

	// Modules: a conformance driver or a sample module run as a principal
	// on the private network; ModuleImage builds a sample module's image
	// from the checkout (ImageID says which one ran); RaiseAMQP raises the
	// AMQP bus of today beside NATS, where the topology has one.
	StartDriver(ctx context.Context, o DriverOptions) (*Driver, error)
	ModuleImage(ctx context.Context, name string) (string, error)
	DriverImage(ctx context.Context, impl conformance.Implementation) (string, error)
	ImageID(ctx context.Context, ref string) (string, error)
	RaiseAMQP(ctx context.Context) (*AMQPBus, error)

	// Evidence: how to reach what is left up, every container's output.
	Describe() string
	SaveLogs(ctx context.Context, dir string) error
}

// Member is one long-running container of a cluster, seen from outside.
type Member interface {
	// ID is the container's id: the same after a reload, another after a
	// recreation.
	ID() string
	Inspect(ctx context.Context) (State, error)
	Processes(ctx context.Context) ([]Process, error)
	Logs(ctx context.Context) (string, error)
	// Exec runs a command inside it (its image must have the program).
	Exec(ctx context.Context, cmd ...string) (exit int, output string, err error)
}

var (
	_ Mesh   = (*Cluster)(nil)
	_ Member = (*Handle)(nil)
)

// Member is the member name is, or ErrUnknownMember naming the valid ones.
func (c *Cluster) Member(name string) (Member, error) { return c.member(name) }
