package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// A Fault is one way the harness breaks a member of the cluster on
// purpose (STYLE.md: etcd's failpoints). Inject applies it and returns
// only once it has taken effect, as seen from outside; Undo removes it and
// returns only once the member is healthy again. Each fault is one small
// file: fault_*.go.
type Fault interface {
	// Name is how a step names it: stop, kill, kill-server, pause,
	// partition from <network>, loss <n>% on <network>, delay <d> on
	// <network>.
	Name() string
	Inject(ctx context.Context, m *Handle) error
	Undo(ctx context.Context, m *Handle) error
}

// Members of the genesis topology by the name a step gives them; a bed's
// topology (harness/topology) names its own.
const (
	MemberBus        = "bus"
	MemberController = "controller"
)

// faultTimeout bounds one inject or one undo, with the wait for its
// effect or for health.
const faultTimeout = 90 * time.Second

// Sentinels a caller branches on.
var (
	// ErrUnknownMember: the step names a member the cluster does not have.
	ErrUnknownMember = errors.New("no such member")
	// ErrUnknownFault: the step names a fault there is none of, or one
	// this member cannot take.
	ErrUnknownFault = errors.New("no such fault")
	// ErrFaultActive: the member already has a fault; undo it first.
	ErrFaultActive = errors.New("a fault is already applied")
	// ErrNoFault: there is nothing to undo on the member.
	ErrNoFault = errors.New("no fault applied")
	// ErrUndo: a fault could not be undone. The cluster is not what the
	// topology says any more; the runner must not reuse it.
	ErrUndo = errors.New("fault not undone")
)

// injected is a fault in effect.
type injected struct {
	fault Fault
	at    time.Time
}

// Members are the names of the topology's members that are up, sorted:
// those a fault step may name.
func (c *Cluster) Members() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.topology.Members {
		if _, ok := c.roles[memberRole(m)]; ok {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// kindRoles is the role the one member of each kind plays in the run.
var kindRoles = map[string]string{topology.KindNATS: RoleNATS, topology.KindController: RoleController, topology.KindRabbitMQ: RoleAMQP, topology.KindPostgres: RoleStore}

// memberRole is the role member m plays in the run: its kind's, or for a
// host, of which there are several, its node's name.
func memberRole(m topology.Member) string {
	switch m.Kind {
	case topology.KindHost, topology.KindSource, topology.KindBuilder:
		// Named by their member: the role the container was raised as.
		return m.Name
	}
	return kindRoles[m.Kind]
}

// member is the container of a member, or ErrUnknownMember naming the
// valid ones.
func (c *Cluster) member(name string) (*Handle, error) {
	c.mu.Lock()
	m, inTopology := c.topology.Named(name)
	h, ok := c.roles[memberRole(m)]
	c.mu.Unlock()
	if inTopology && !ok && m.OnDemand {
		return nil, fmt.Errorf("%w %q: it is raised when a step asks for it, and none did (this cluster has: %s)", ErrUnknownMember, name, strings.Join(c.Members(), ", "))
	}
	if !inTopology || !ok {
		return nil, fmt.Errorf("%w %q (this cluster has: %s)", ErrUnknownMember, name, strings.Join(c.Members(), ", "))
	}
	return h, nil
}

// kindOf is the kind of the member called name, or "".
func (c *Cluster) kindOf(name string) string {
	m, _ := c.topology.Named(name)
	return m.Kind
}

// FaultNames are the faults member can take, sorted.
func (c *Cluster) FaultNames(member string) []string {
	out := []string{"kill", "pause", "stop"}
	for _, n := range c.NetworkNames() {
		out = append(out, "partition from "+n, "loss <1-100>% on "+n, "delay <duration> on "+n)
	}
	if c.kindOf(member) == topology.KindNATS {
		out = append(out, "kill-server")
	}
	sort.Strings(out)
	return out
}

// NetworkNames are the networks of the cluster, as faults name them.
func (c *Cluster) NetworkNames() []string { return slices.Clone(topology.Networks) }

// newFault builds the fault name describes, for member; an unknown one is
// refused with the faults that member can take.
func (c *Cluster) newFault(member, name string) (Fault, error) {
	switch {
	case name == "stop":
		return stopFault{}, nil
	case name == "kill":
		return killFault{}, nil
	case name == "pause":
		return pauseFault{}, nil
	case name == "kill-server" && c.kindOf(member) == topology.KindNATS:
		return killServerFault{}, nil
	case strings.HasPrefix(name, "loss ") || strings.HasPrefix(name, "delay "):
		if f, ok := c.parseLink(name); ok {
			return f, nil
		}
	case strings.HasPrefix(name, "partition from "):
		which := strings.TrimPrefix(name, "partition from ")
		if net, ok := c.networks[which]; ok {
			return &partitionFault{network: which, docker: net}, nil
		}
	}
	return nil, fmt.Errorf("%w %q for %s (it can take: %s)", ErrUnknownFault, name, member, strings.Join(c.FaultNames(member), ", "))
}

// Inject applies the fault named to member, within faultTimeout, and
// narrates it. It returns how long it took to take effect.
func (c *Cluster) Inject(ctx context.Context, member, fault string) (time.Duration, error) {
	h, err := c.member(member)
	if err != nil {
		return 0, err
	}
	f, err := c.newFault(member, fault)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if cur, ok := c.faults[member]; ok {
		c.mu.Unlock()
		return 0, fmt.Errorf("%w to %s (%s since %s): undo it first", ErrFaultActive, member, cur.fault.Name(), cur.at.Format(time.TimeOnly))
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, faultTimeout)
	defer cancel()
	start := time.Now()
	h.disturbed.Store(true)
	c.s.narrate("fault: %s on %s …", f.Name(), member)
	if err := f.Inject(ctx, h); err != nil {
		// Half applied is still applied: keep it, so Undo and teardown
		// try; a fault this machine cannot apply applied nothing.
		if !errors.Is(err, ErrFaultUnavailable) {
			c.setFault(member, f, start)
		}
		return 0, fmt.Errorf("inject %s on %s: %w", f.Name(), member, err)
	}
	took := time.Since(start)
	c.setFault(member, f, start)
	c.s.narrate("fault: %s on %s applied in %s", f.Name(), member, took.Round(time.Millisecond))
	return took, nil
}

// Undo removes member's fault, within faultTimeout, and narrates it. It
// returns how long the member took to be healthy again. An undo that
// fails wraps ErrUndo: the cluster is tainted.
func (c *Cluster) Undo(ctx context.Context, member string) (time.Duration, error) {
	h, err := c.member(member)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	cur, ok := c.faults[member]
	c.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%w on %s", ErrNoFault, member)
	}
	ctx, cancel := context.WithTimeout(ctx, faultTimeout)
	defer cancel()
	start := time.Now()
	if err := cur.fault.Undo(ctx, h); err != nil {
		c.s.narrate("fault: %s on %s NOT undone: %v", cur.fault.Name(), member, err)
		return 0, fmt.Errorf("%w: %s on %s: %w", ErrUndo, cur.fault.Name(), member, err)
	}
	c.mu.Lock()
	delete(c.faults, member)
	c.mu.Unlock()
	took := time.Since(start)
	c.s.narrate("fault: %s on %s undone in %s", cur.fault.Name(), member, took.Round(time.Millisecond))
	return took, nil
}

// Fault is the name of member's fault in effect, or "".
func (c *Cluster) Fault(member string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.faults[member]; ok {
		return f.fault.Name()
	}
	return ""
}

// UndoAll undoes every fault still in effect, as a scenario's teardown
// does; it returns every undo that failed, each wrapping ErrUndo.
func (c *Cluster) UndoAll(ctx context.Context) error {
	c.mu.Lock()
	var members []string
	for m := range c.faults {
		members = append(members, m)
	}
	c.mu.Unlock()
	slices.Sort(members)
	var errs []error
	for _, m := range members {
		if _, err := c.Undo(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) setFault(member string, f Fault, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults == nil {
		c.faults = map[string]injected{}
	}
	c.faults[member] = injected{fault: f, at: at}
}

// waitState polls the member's state until ok says it holds.
func waitState(ctx context.Context, m *Handle, what string, ok func(State) bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := m.Inspect(ctx)
		if err == nil && ok(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be %s: %w (last state %+v, %v)", m.role, what, ctx.Err(), st, err)
		case <-tick.C:
		}
	}
}

// startStopped starts a member a fault stopped, once it has stopped: an
// inject cut short (its context ended) may still be landing, and a start
// before the container is down would be a no-op that the end of the
// container then undoes.
// One that never landed leaves the member running: after a grace period
// with the member still up, there is nothing to undo.
func startStopped(ctx context.Context, m *Handle) error {
	grace, cancel := context.WithTimeout(ctx, landingGrace)
	err := waitState(grace, m, "stopped", func(s State) bool { return !s.Running })
	cancel()
	if err != nil && ctx.Err() == nil {
		if st, ierr := m.Inspect(ctx); ierr == nil && st.Running {
			return nil
		}
	}
	if err != nil {
		return err
	}
	return m.Start(ctx)
}

// landingGrace is how long an undo waits for a stop or kill cut short to
// land before it takes the member as never stopped.
const landingGrace = 5 * time.Second
