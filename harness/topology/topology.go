// Package topology says, as data, what a bed raises: its members (the
// bus, the controller, a broker …), each of a kind the harness knows how
// to run, and the networks each is on. A bed declares one (beds.Bed); the
// harness raises it; `bedrun list` shows it. It is pure data with no
// dependency on Docker, so a bed, the runner and their tests can read it.
//
// A new kind of member is one small package in harness shaped like a
// testcontainers-go module (Run(ctx, image, opts...), defaults first, the
// container returned even on error, explicit waits), a Kind here, and a
// line in a topology.
package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kinds of member the harness can raise.
const (
	// KindNATS is the bus's server: our entrypoint supervising nats-server
	// (one now; a three-server cluster is ROADMAP item 2, so a topology
	// may list several).
	KindNATS = "nats"
	// KindController is the production controller, raised after genesis
	// minted its state; it needs a bus.
	KindController = "controller"
	// KindRabbitMQ is the AMQP bus the mesh has today, raised when a step
	// first asks for it.
	KindRabbitMQ = "rabbitmq"
	// KindPostgres is the controller's store (PostgreSQL), raised before
	// genesis so that every controller run keeps its state there; one at
	// most, conventionally named "store".
	KindPostgres = "postgres"
	// KindHost is a node's host (mesh-host), named by its node ("node-a"):
	// the harness issues it a token once the controller is up and runs it
	// on the private network, where it enrols. It needs the bus and the
	// controller.
	KindHost = "host"
	// KindBuilder is the build machine (mesh-build serve), and
	// KindSource a source repository (the stand-in), named by the
	// repository ("modules"): the build path of design 25 §9 step 4.
	KindBuilder = "builder"
	KindSource  = "source"
	// KindPredecessor is the stand-in for the predecessor's client
	// (design 25 §5), with its own user and virtual host on the broker,
	// raised with the broker, before the mesh's members: it was there
	// first. It needs a member of kind rabbitmq raised with the cluster.
	KindPredecessor = "predecessor"
)

// Kinds lists every kind, in the order the harness raises them: the store
// before genesis, the bus before the controller that needs it, the hosts
// after the controller that answers their enrolment.
var Kinds = []string{KindPostgres, KindNATS, KindRabbitMQ, KindPredecessor, KindController, KindHost, KindSource, KindBuilder}

// Buses a mesh's own traffic can be on (Topology.Bus).
const (
	BusNATS = "nats"
	BusAMQP = "amqp"
)

// busKind is the kind of member each bus is served by.
var busKind = map[string]string{BusNATS: KindNATS, BusAMQP: KindRabbitMQ}

// Networks of a cluster.
const (
	// Private is the mesh's own network: every member is on it.
	Private = "private"
	// Outside stands outside the mesh: only the bus's client port is
	// meant to be reachable from it.
	Outside = "outside"
)

// Networks lists every network a member may be on.
var Networks = []string{Private, Outside}

// Member is one long-running container of a topology.
type Member struct {
	// Name is how steps call it: "bus", "controller", "amqp".
	Name string
	// Kind is one of Kinds.
	Kind string
	// Networks are those it is attached to; every member is on Private.
	Networks []string
	// OnDemand members are not raised with the cluster: a step raises
	// them when it first needs them (the broker beside NATS, the NATS
	// server beside the broker), or a scenario asks for them with its
	// cluster (the build path: WithBuildPath).
	OnDemand bool
	// Args are added to the member's command line: a bed's settings of
	// the controller's waits ("--events-ack-wait=5s"), shorter than
	// production's where a scenario proves the mechanism rather than the
	// number. Only the controller takes them.
	Args []string
}

// Topology is what a bed raises.
type Topology struct {
	Members []Member
	// Bus is the bus the mesh's own traffic is on: BusNATS (the default)
	// or BusAMQP, the bus it has today, with the controller's genesis on
	// it. Its member is raised with the cluster; the other bus may stand
	// beside it, raised with the cluster or on demand.
	Bus string
	// TokenGrace is how long each token the harness has the controller
	// issue keeps its user on the bus once spent or expired (token issue
	// --grace): a bed shortens it where a scenario waits it out. Zero: the
	// controller's default.
	TokenGrace time.Duration
}

// MeshBus is t's Bus, BusNATS when unset.
func (t Topology) MeshBus() string {
	if t.Bus == "" {
		return BusNATS
	}
	return t.Bus
}

// ErrBadTopology is wrapped by every refusal of a topology.
var ErrBadTopology = errors.New("bad topology")

// Check refuses a topology the harness could not raise, naming what is
// wrong and what is valid.
func (t Topology) Check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadTopology}, args...)...))
	}
	if len(t.Members) == 0 {
		bad("no members")
	}
	if t.TokenGrace < 0 {
		bad("a token's grace of %s: give one above zero, or zero for the controller's default", t.TokenGrace)
	}
	names := map[string]bool{}
	count := map[string]int{}
	for i, m := range t.Members {
		where := fmt.Sprintf("members[%d] %q", i, m.Name)
		if m.Name == "" || strings.ContainsAny(m.Name, " \t\"") {
			bad("%s: a member needs a name of one word", where)
		}
		if names[m.Name] {
			bad("%s: named twice", where)
		}
		names[m.Name] = true
		if !slices.Contains(Kinds, m.Kind) {
			bad("%s: unknown kind %q (the harness runs: %s)", where, m.Kind, strings.Join(Kinds, ", "))
		}
		count[m.Kind]++
		if len(m.Args) > 0 && m.Kind != KindController {
			bad("%s: a member of kind %s takes no args (only the controller's waits are settings yet)", where, m.Kind)
		}
		for _, a := range m.Args {
			if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
				bad("%s: arg %q: give each setting as --name=value", where, a)
			}
		}
		if !slices.Contains(m.Networks, Private) {
			bad("%s: every member is on the %s network", where, Private)
		}
		for _, n := range m.Networks {
			if !slices.Contains(Networks, n) {
				bad("%s: unknown network %q (valid: %s)", where, n, strings.Join(Networks, ", "))
			}
		}
	}
	bus := t.MeshBus()
	kind, ok := busKind[bus]
	switch {
	case !ok:
		bad("bus %q: unknown (valid: %s, %s)", t.Bus, BusNATS, BusAMQP)
	case count[kind] == 0:
		bad("no member of kind %s: nothing can run without the bus (the mesh is on %s)", kind, bus)
	case slices.ContainsFunc(t.Members, func(m Member) bool { return m.Kind == kind && m.OnDemand }):
		bad("the member of kind %s carries the mesh (bus %s): it is raised with the cluster, not on demand", kind, bus)
	}
	if count[KindNATS] > 1 {
		bad("%d members of kind %s: the harness raises one server yet (a cluster of three is to come)", count[KindNATS], KindNATS)
	}
	if count[KindRabbitMQ] > 1 {
		bad("%d members of kind %s: the harness raises one broker", count[KindRabbitMQ], KindRabbitMQ)
	}
	if count[KindController] > 1 {
		bad("%d members of kind %s: a mesh has one controller", count[KindController], KindController)
	}
	if count[KindPostgres] > 1 {
		bad("%d members of kind %s: the controller has one store", count[KindPostgres], KindPostgres)
	}
	if count[KindHost] > 0 && (count[KindController] == 0 || count[kind] == 0) {
		bad("members of kind %s need a member of kind %s and one of kind %s: a host enrols over the bus with the controller", KindHost, KindController, kind)
	}
	if count[KindSource]+count[KindBuilder] > 0 && (count[KindController] == 0 || count[kind] == 0) {
		bad("members of kinds %s and %s need a member of kind %s and one of kind %s: their credentials are the controller's, their work comes over the bus", KindSource, KindBuilder, KindController, kind)
	}
	if count[KindPredecessor] > 1 {
		bad("%d members of kind %s: the harness raises one predecessor's client", count[KindPredecessor], KindPredecessor)
	}
	if count[KindPredecessor] > 0 && !slices.ContainsFunc(t.Members, func(m Member) bool { return m.Kind == KindRabbitMQ && !m.OnDemand }) {
		bad("a member of kind %s needs a member of kind %s raised with the cluster: it is the broker's client", KindPredecessor, KindRabbitMQ)
	}
	for i, m := range t.Members {
		// The broker may stand beside a mesh on NATS; a NATS server may be
		// raised beside a mesh on AMQP, for the adoption (design 25 §9
		// step 2); the build path is raised for the scenarios that ask
		// for it (WithBuildPath). Nothing else waits for a step.
		onDemand := m.Kind == KindRabbitMQ || m.Kind == KindNATS && bus == BusAMQP || m.Kind == KindSource || m.Kind == KindBuilder
		if m.OnDemand && !onDemand {
			bad("members[%d] %q: a member of kind %s is raised with the cluster, not on demand (only %s, %s and %s are, and %s beside a mesh on %s)", i, m.Name, m.Kind, KindRabbitMQ, KindSource, KindBuilder, KindNATS, BusAMQP)
		}
	}
	return errors.Join(errs...)
}

// Named is the member called name.
func (t Topology) Named(name string) (Member, bool) {
	i := slices.IndexFunc(t.Members, func(m Member) bool { return m.Name == name })
	if i < 0 {
		return Member{}, false
	}
	return t.Members[i], true
}

// Names are the members' names, in the topology's order.
func (t Topology) Names() []string {
	out := make([]string, len(t.Members))
	for i, m := range t.Members {
		out[i] = m.Name
	}
	return out
}

// String is the topology in one line per member, as `bedrun list` shows
// it: "bus (nats) on private, outside", after a line naming the mesh's
// bus when it is not NATS.
func (t Topology) String() string {
	var b strings.Builder
	if t.MeshBus() != BusNATS {
		fmt.Fprintf(&b, "the mesh on %s\n", t.MeshBus())
	}
	for i, m := range t.Members {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (%s) on %s", m.Name, m.Kind, strings.Join(m.Networks, ", "))
		if m.OnDemand {
			b.WriteString(", raised when a step asks")
		}
		if len(m.Args) > 0 {
			b.WriteString(", with " + strings.Join(m.Args, " "))
		}
	}
	if t.TokenGrace > 0 {
		fmt.Fprintf(&b, "\ntokens issued with a grace of %s", t.TokenGrace)
	}
	return b.String()
}

// Genesis is the cluster of a mesh raised from nothing: the bus, reached
// from outside on its client port only, and the controller.
func Genesis() Topology {
	return Topology{Members: []Member{
		{Name: "bus", Kind: KindNATS, Networks: []string{Private, Outside}},
		{Name: "controller", Kind: KindController, Networks: []string{Private}},
	}}
}

// Living is the cluster of a mesh living on its bus (design 25 §10 step
// 4): the store the controller keeps its state in, the bus, the
// controller, and a host on each of the nodes node-a and node-b; and the
// build path (the repository "modules" and a builder), raised for the
// scenarios that ask for it (WithBuildPath): the others never use it, and
// two containers and their credentials less is a quicker raise.
func Living() Topology {
	return Topology{Members: []Member{
		{Name: "store", Kind: KindPostgres, Networks: []string{Private}},
		{Name: "bus", Kind: KindNATS, Networks: []string{Private, Outside}},
		{Name: "controller", Kind: KindController, Networks: []string{Private}},
		{Name: "node-a", Kind: KindHost, Networks: []string{Private}},
		{Name: "node-b", Kind: KindHost, Networks: []string{Private}},
		{Name: "modules", Kind: KindSource, Networks: []string{Private}, OnDemand: true},
		{Name: "builder", Kind: KindBuilder, Networks: []string{Private}, OnDemand: true},
	}}
}

// LivingOnAMQP is Living on the bus the mesh has today: the broker
// instead of the NATS server, the controller's genesis on it, the build
// path's members with their credentials for the broker
// (docs/decisions/0011), raised for the scenarios that ask for them.
func LivingOnAMQP() Topology {
	return Topology{Bus: BusAMQP, Members: []Member{
		{Name: "store", Kind: KindPostgres, Networks: []string{Private}},
		{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}},
		{Name: "controller", Kind: KindController, Networks: []string{Private}},
		{Name: "node-a", Kind: KindHost, Networks: []string{Private}},
		{Name: "node-b", Kind: KindHost, Networks: []string{Private}},
		{Name: "modules", Kind: KindSource, Networks: []string{Private}, OnDemand: true},
		{Name: "builder", Kind: KindBuilder, Networks: []string{Private}, OnDemand: true},
	}}
}

// WithBuildPath is t with its build path (its members of kinds source
// and builder) raised with the cluster rather than left on demand: what
// a scenario that builds or installs asks for.
func (t Topology) WithBuildPath() Topology {
	out := t
	out.Members = slices.Clone(t.Members)
	for i, m := range out.Members {
		if m.Kind == KindSource || m.Kind == KindBuilder {
			out.Members[i].OnDemand = false
		}
	}
	return out
}

// Adoption is the cluster of design 25 §10 step 2: a mesh living on the
// bus it has today (the store, the broker, the controller, a host on
// node-a and node-b), on the same broker the predecessor's client, raised
// with the broker, before the mesh's members, and the NATS server an
// operator raises beside the broker when a step asks, to be adopted.
func Adoption() Topology {
	return Topology{Bus: BusAMQP, Members: []Member{
		{Name: "store", Kind: KindPostgres, Networks: []string{Private}},
		{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}},
		{Name: "predecessor", Kind: KindPredecessor, Networks: []string{Private}},
		{Name: "bus", Kind: KindNATS, Networks: []string{Private}, OnDemand: true},
		{Name: "controller", Kind: KindController, Networks: []string{Private}},
		{Name: "node-a", Kind: KindHost, Networks: []string{Private}},
		{Name: "node-b", Kind: KindHost, Networks: []string{Private}},
	}}
}

// Has reports whether t has a member of kind.
func (t Topology) Has(kind string) bool {
	return slices.ContainsFunc(t.Members, func(m Member) bool { return m.Kind == kind })
}

// OfKind are t's members of kind, in t's order.
func (t Topology) OfKind(kind string) []Member {
	var out []Member
	for _, m := range t.Members {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// WithControllerArgs is t with args added to its controller's command
// line (Member.Args).
func (t Topology) WithControllerArgs(args ...string) Topology {
	out := t
	out.Members = slices.Clone(t.Members)
	for i, m := range out.Members {
		if m.Kind == KindController {
			out.Members[i].Args = append(slices.Clone(m.Args), args...)
		}
	}
	return out
}

// WithTokenGrace is t with the tokens the harness issues given grace
// (Topology.TokenGrace).
func (t Topology) WithTokenGrace(grace time.Duration) Topology {
	out := t
	out.Members = slices.Clone(t.Members)
	out.TokenGrace = grace
	return out
}

// WithAMQP is t with the AMQP bus of today beside it, raised on demand.
func (t Topology) WithAMQP() Topology {
	out := t
	out.Members = slices.Clone(t.Members)
	out.Members = append(out.Members, Member{Name: "amqp", Kind: KindRabbitMQ, Networks: []string{Private}, OnDemand: true})
	return out
}
