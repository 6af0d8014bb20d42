package harness

import (
	"context"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/harness/rabbitmq"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// Read this file first: the harness as a bed's steps see it. The steps
// hold a Mesh and nothing else of the harness's: no Docker, no
// testcontainers, no host path of the controller's state, no
// mesh-controller command line (package controllerctr spells those,
// here). *Cluster, raised by Session.RaiseGenesis on testcontainers-go, is
// the one implementation of every interface below.
//
// A Mesh is the cluster's containers and what an operator does with it.
// What only some topologies or scenarios need (the store, the NATS
// configuration, the AMQP broker, running modules) is an optional
// capability: a step asks for one by type assertion on its Mesh, as
// e2e-framework's steps do with its optional provider interfaces, so that
// a Mesh without it is refused by name rather than answering wrongly.

// Mesh is a raised cluster as a bed's steps hold it.
type Mesh interface {
	Containers
	Operator
}

// Containers is the cluster itself, seen from outside: its members, the
// faults that break them, the one-shot observer, and the evidence left
// when a scenario fails.
type Containers interface {
	// Members are the long-running containers by name (MemberBus,
	// MemberController, the store, a host by its node); Member is one of
	// them, or ErrUnknownMember naming the valid ones.
	Members() []string
	Member(name string) (Member, error)

	// Faults (faults.go, one file each): Inject applies one to a member
	// and returns once it has taken effect; Undo removes it and returns
	// once the member is healthy again (ErrUndo if it cannot be: the
	// cluster is not to be reused); UndoAll undoes whatever is left, as
	// teardown does. FaultNames are those a member can take; Fault is the
	// one a member has now ("" for none).
	FaultNames(member string) []string
	Inject(ctx context.Context, member, fault string) (time.Duration, error)
	Undo(ctx context.Context, member string) (time.Duration, error)
	Fault(member string) string
	UndoAll(ctx context.Context) error

	// Probe runs the one-shot observer on a network (Private, Outside).
	Probe(ctx context.Context, network string, args ...string) (ProbeResult, error)

	// Evidence: how to reach what is left up, every container's output.
	Describe() string
	SaveLogs(ctx context.Context, dir string) error
}

// Operator is what an operator does through the controller, as
// mesh-controller's commands in a container of their own beside its
// state: read credentials, issue tokens and persons, change the mesh, ask
// its status. Each method names an intent; the controller's command lines
// are the harness's to spell.
type Operator interface {
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
	// TokenGrace is how long each of those tokens keeps its user on the
	// bus once spent or expired (the topology's, or the controller's
	// default).
	TokenGrace() time.Duration
	Enrolment(node string) (Enrolment, error)

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

	// StageFile puts a description where the controller's commands read
	// it, as name. Push sends the description staged as name to the
	// running controller, which applies it whole or not at all
	// (mesh-controller push); Apply recomposes the mesh from it beside the
	// state (mesh-controller apply). Each returns once the command has
	// ended; an exit other than 0 is an error quoting what it printed.
	StageFile(hostPath, name string) error
	Push(ctx context.Context, name string) error
	Apply(ctx context.Context, name string) error
	// Status is the controller's whole status as JSON (status --json),
	// read from whichever store it keeps.
	Status(ctx context.Context) ([]byte, error)

	// RunController runs mesh-controller with args in a container of its
	// own beside the state, for a command no method above names; a
	// non-zero exit is the controller's answer, not an error.
	RunController(ctx context.Context, args ...string) (output string, exit int, err error)
}

// StoreQuerier is the capability of a Mesh whose topology has a store:
// QueryStore reads the controller's PostgreSQL store itself (psql in the
// store member's container), rows of tab-separated columns, rather than
// what the controller says of it.
type StoreQuerier interface {
	QueryStore(ctx context.Context, sql string) ([][]string, error)
}

// NATSConfig is the capability of a Mesh on NATS: the nats container's
// watched configuration, its host path, read and written in place (a
// torn write is a fault a bed makes on purpose).
type NATSConfig interface {
	NATSConfigFile() string
	ReadNATSConfig() ([]byte, error)
	WriteNATSConfig(content []byte) error
}

// AMQPRaiser is the capability of a Mesh whose topology has a RabbitMQ
// member: RaiseAMQP raises the broker (the mesh's own bus, or the AMQP
// bus of today beside NATS), or returns the one raised already.
type AMQPRaiser interface {
	RaiseAMQP(ctx context.Context) (AMQPBroker, error)
}

// PredecessorWatcher is the capability of a Mesh whose topology has a
// predecessor: the witness reads everything the predecessor's client
// could notice, from outside it and the mesh.
type PredecessorWatcher interface {
	PredecessorWitness(ctx context.Context) (observe.Witness, error)
}

// NATSBesideRaiser is the capability of a Mesh on AMQP whose topology has
// a NATS server raised on demand: an operator raises it beside the
// broker with a configuration of its own (RaiseNATSBeside), for the mesh
// to adopt; ReadNATSBesideConfig reads its watched file.
type NATSBesideRaiser interface {
	RaiseNATSBeside(ctx context.Context) (NATSBeside, error)
	ReadNATSBesideConfig() ([]byte, error)
	// AdoptBeside runs mesh-controller adopt on it, the server asked at
	// monitor ("" the description's): what it printed, and its exit.
	AdoptBeside(ctx context.Context, monitor string) (output string, exit int, err error)
	// Cutover runs mesh-controller cutover with args (--within, --wait,
	// --json): what it printed, and its exit.
	Cutover(ctx context.Context, args ...string) (output string, exit int, err error)
}

// AMQPBroker is a raised RabbitMQ broker as the steps observe it: where
// its TLS listener is reached from here, what it holds by its own account
// (asked of the node, as rabbitmqctl asks it), and the principals' AMQP credentials.
type AMQPBroker interface {
	// Address is host:port of the broker's TLS listener from this host;
	// a credential names the broker as the private network knows it:
	// dial here, check that name.
	Address(ctx context.Context) (string, error)
	// Queues are the names of the queues in virtual host vhost.
	Queues(ctx context.Context, vhost string) ([]string, error)
	// Connections are the open connections with columns, as rabbitmqctl
	// lists them in JSON (observe.AMQPConnections reads them).
	Connections(ctx context.Context, columns ...string) ([]byte, error)
	// BindingKeys are the routing keys bound from exchange in vhost.
	BindingKeys(ctx context.Context, vhost, exchange string) ([]string, error)
	// Credential is user's credential on the AMQP bus.
	Credential(user string) (wire.Credential, error)
	// ListQueues is vhost's queues with columns, as rabbitmqctl lists
	// them in JSON (observe reads them: the control plane's counts).
	ListQueues(ctx context.Context, vhost string, columns ...string) ([]byte, error)
	// Observe watches the control plane's firehose as an observer of the
	// harness's own, no principal of the mesh, until the trace is closed.
	Observe(ctx context.Context) (*observe.AMQPTrace, error)
	// ConnectionEvents are the broker's own record of connections and
	// logins since it was raised, closed and refused ones included.
	ConnectionEvents(ctx context.Context) ([]rabbitmq.Event, error)
}

// ModuleRunner is the capability of running programs as principals on
// the private network: a conformance driver or a sample module.
// ModuleImage builds a sample module's image from the checkout and
// DriverImage a conformance driver's, each when missing or stale; ImageID
// says which image a reference names, so a bed can tell that two runs
// were of the same one.
type ModuleRunner interface {
	StartDriver(ctx context.Context, o DriverOptions) (Program, error)
	ModuleImage(ctx context.Context, name string) (string, error)
	DriverImage(ctx context.Context, impl conformance.Implementation) (string, error)
	ImageID(ctx context.Context, ref string) (string, error)
}

// Program is one program ModuleRunner started: a driver's command
// (speaking driverproto on its standard output) or a sample module.
type Program interface {
	// Lines is what it printed so far, read as the protocol's lines;
	// WaitFor polls them until one of kind; Wait waits for the end and
	// returns the exit status and every line.
	Lines(ctx context.Context) ([]driverproto.Line, error)
	WaitFor(ctx context.Context, kind driverproto.Kind, within time.Duration) (driverproto.Line, error)
	Wait(ctx context.Context, within time.Duration) (int, []driverproto.Line, error)
	// Logs is everything it wrote, standard error included; WaitLog
	// polls them until text appears (a program that speaks no protocol).
	Logs(ctx context.Context) (string, error)
	WaitLog(ctx context.Context, text string, within time.Duration) error
	// Stop ends it if it still runs; Running says whether it does.
	Stop(ctx context.Context) error
	Running(ctx context.Context) (bool, error)
	// Image is the id of the image it runs.
	Image(ctx context.Context) (string, error)
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
	// ReadFile is a file inside it, copied out by the engine (fs.ErrNotExist
	// when there is none).
	ReadFile(ctx context.Context, path string) ([]byte, error)
}

var (
	_ Mesh               = (*Cluster)(nil)
	_ Containers         = (*Cluster)(nil)
	_ Operator           = (*Cluster)(nil)
	_ StoreQuerier       = (*Cluster)(nil)
	_ NATSConfig         = (*Cluster)(nil)
	_ AMQPRaiser         = (*Cluster)(nil)
	_ PredecessorWatcher = (*Cluster)(nil)
	_ NATSBesideRaiser   = (*Cluster)(nil)
	_ ModuleRunner       = (*Cluster)(nil)
	_ AMQPBroker         = (*AMQPBus)(nil)
	_ Program            = (*Driver)(nil)
	_ Member             = (*Handle)(nil)
)

// Member is the member name is, or ErrUnknownMember naming the valid ones.
func (c *Cluster) Member(name string) (Member, error) { return c.member(name) }
