package provision

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// The loop's numbers (design 19).
const (
	// failAfter is how long a consumer is failed without one success before
	// provisioner.failing is said.
	failAfter = 5 * time.Minute
	// failEvery is how often it is said again while it lasts.
	failEvery = 15 * time.Minute
	// retirePasses is how many consecutive readings of the contributions
	// file must find the same set unasked before it is retired...
	retirePasses = 5
	// retireAfter ...and for how long.
	retireAfter = 10 * time.Minute
	// personOver is the size above which a set waits for a person.
	personOver = 3
)

// opKind is what the machine asks the driver to do with the Provider.
type opKind int

const (
	opEnsure opKind = iota + 1
	opCheck
	opRetire // Disable (unless the provider cannot), then Mark
)

// op is one call the driver makes; result is what came of it.
type op struct {
	kind     opKind
	consumer Consumer
	grant    Grant  // opEnsure, opCheck
	mark     Mark   // opRetire
	set      string // opRetire: the set it retires
}

type result struct {
	op  op
	err error
	// accessKept: the provider could not disable, so the retirement only
	// marked the consumer.
	accessKept bool
}

// event is one event to publish; body is one of wire's event bodies.
type event struct {
	key  string
	body any
}

// consumerState is what the machine knows of one consumer.
type consumerState struct {
	asked   bool  // in the latest reading of the contributions file
	grant   Grant // as last asked
	made    bool  // Ensure succeeded for this grant and nothing failed since: Check is enough
	held    bool  // the backend holds it (latest listing, or a successful Ensure since)
	retired *Mark // held and retired

	failingSince time.Time // first failure since the last success; zero when not failing
	class        string    // class of the latest failure
	announced    time.Time // last provisioner.failing; zero when none since the last success
	// owesRecovery: the controller may hold a failing word for this
	// consumer — this process announced one, or it has not had a success
	// since this process started, so its predecessor may have.
	owesRecovery bool
}

// unaskedSet is the set of active held consumers nobody asks for.
type unaskedSet struct {
	members []Consumer // sorted
	id      string
	since   time.Time // the first reading that found this set
	passes  int       // consecutive readings that found this same set
	state   string    // wire.SetCounting, SetPending or SetRejected
	reason  string    // why it waits for a person
}

// machine is the loop's pure core: it is told the time and what was
// observed, and answers the calls to make and the events to publish. It
// does no I/O and never reads a clock.
type machine struct {
	cs  map[Consumer]*consumerState
	set *unaskedSet
}

func newMachine() *machine { return &machine{cs: make(map[Consumer]*consumerState)} }

// get returns the consumer's state, creating it on first sight. A consumer
// first seen owes a recovery unless it is already retired: this process
// cannot know what its predecessor said about it.
func (m *machine) get(c Consumer, retired *Mark) *consumerState {
	s, ok := m.cs[c]
	if !ok {
		s = &consumerState{owesRecovery: retired == nil}
		m.cs[c] = s
	}
	return s
}

func (m *machine) sorted() []Consumer {
	out := make([]Consumer, 0, len(m.cs))
	for c := range m.cs {
		out = append(out, c)
	}
	slices.SortFunc(out, compareConsumers)
	return out
}

func compareConsumers(a, b Consumer) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Module, b.Module))
}

// held records the backend's listing of what it holds.
func (m *machine) held(list []Held) {
	seen := make(map[Consumer]bool, len(list))
	for _, h := range list {
		s := m.get(h.Consumer, h.Retired)
		s.held = true
		s.retired = nil
		if h.Retired != nil {
			mk := *h.Retired
			s.retired = &mk
		}
		seen[h.Consumer] = true
	}
	for c, s := range m.cs {
		if !seen[c] {
			s.held, s.retired = false, nil
		}
	}
}

// pass plans one pass over grants, the latest reading of the contributions
// file. counted says this pass read the file and knows what the backend
// holds, so it counts toward retirement; a pass that could not neither
// counts nor resets the count.
func (m *machine) pass(now time.Time, grants []Grant, counted bool) ([]op, []event) {
	var ops []op
	var evs []event
	asked := make(map[Consumer]bool, len(grants))
	for _, g := range grants {
		asked[g.Consumer] = true
	}
	for _, c := range m.sorted() {
		s := m.cs[c]
		if asked[c] {
			continue
		}
		// A withdrawal ends a failure: the consumer no longer wants what
		// failed.
		s.asked, s.made = false, false
		s.failingSince, s.announced = time.Time{}, time.Time{}
		if s.owesRecovery {
			s.owesRecovery = false
			evs = append(evs, recovered(c, wire.RecoveredWithdrawn))
		}
	}
	for _, g := range grants {
		s := m.get(g.Consumer, nil)
		s.asked = true
		kind := opCheck
		if s.retired != nil || !s.made || !sameGrant(s.grant, g) {
			kind = opEnsure
		}
		s.grant = g
		ops = append(ops, op{kind: kind, consumer: g.Consumer, grant: g})
	}
	if counted {
		o, e := m.retirement(now)
		ops, evs = append(ops, o...), append(evs, e...)
	}
	m.forget()
	return ops, evs
}

// forget drops consumers that are neither held nor asked for and owe
// nothing, so the machine's memory is bounded by what exists.
func (m *machine) forget() {
	for c, s := range m.cs {
		if !s.held && !s.asked && !s.owesRecovery {
			delete(m.cs, c)
		}
	}
}

func sameGrant(a, b Grant) bool {
	return a.Consumer == b.Consumer && a.Secret == b.Secret && a.At.Equal(b.At) && string(a.Values) == string(b.Values)
}

// retirement counts the set of active held consumers nobody asks for and
// retires it, or puts it before a person, once it has been the same set in
// retirePasses consecutive readings and for retireAfter.
func (m *machine) retirement(now time.Time) ([]op, []event) {
	active := 0
	var unasked []Consumer
	for _, c := range m.sorted() {
		s := m.cs[c]
		if !s.held || s.retired != nil {
			continue
		}
		active++
		if !s.asked {
			unasked = append(unasked, c)
		}
	}
	if len(unasked) == 0 {
		return nil, m.dropSet(now)
	}
	var evs []event
	id := setID(unasked)
	if m.set == nil || m.set.id != id {
		evs = m.dropSet(now)
		m.set = &unaskedSet{members: unasked, id: id, since: now, state: wire.SetCounting}
	}
	set := m.set
	set.passes++
	if set.state != wire.SetCounting || set.passes < retirePasses || now.Sub(set.since) < retireAfter {
		return nil, evs
	}
	if reason := needsPerson(len(unasked), active); reason != "" {
		set.state, set.reason = wire.SetPending, reason
		return nil, append(evs, event{wire.EventProvisionerRetirement, wire.RetirementEvent{
			Action: wire.RetirementPending, Set: id, Consumers: refs(unasked), At: now.UTC(), Why: reason,
		}})
	}
	why := fmt.Sprintf("unasked in %d consecutive readings of the contributions file since %s",
		set.passes, set.since.UTC().Format(time.RFC3339))
	return retireOps(unasked, id, now, why), evs
}

func retireOps(cs []Consumer, set string, now time.Time, why string) []op {
	ops := make([]op, len(cs))
	for i, c := range cs {
		ops[i] = op{kind: opRetire, consumer: c, set: set, mark: Mark{At: now.UTC(), Why: why}}
	}
	return ops
}

// needsPerson says why a set of n unasked consumers, of active held,
// must wait for a person, or "" when it need not.
func needsPerson(n, active int) string {
	switch {
	case n > personOver:
		return fmt.Sprintf("a set of %d is more than %d", n, personOver)
	case 2*n > active:
		return fmt.Sprintf("a set of %d is more than half of the %d active consumers held", n, active)
	}
	return ""
}

// dropSet forgets the current set; a pending one is said to be cancelled,
// since the person it waited for must not approve what is no longer true.
func (m *machine) dropSet(now time.Time) []event {
	set := m.set
	m.set = nil
	if set == nil || set.state != wire.SetPending {
		return nil
	}
	return []event{{wire.EventProvisionerRetirement, wire.RetirementEvent{
		Action: wire.RetirementCancelled, Set: set.id, Consumers: refs(set.members), At: now.UTC(),
	}}}
}

// setID names a set by its members, so that the same set has the same id
// and an approval of a set that has since changed cannot match.
func setID(cs []Consumer) string {
	h := sha256.New()
	for _, c := range cs {
		fmt.Fprintf(h, "%s/%s\n", c.Node, c.Module)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// settle takes in what came of the calls and answers the events that
// follow from them.
func (m *machine) settle(now time.Time, results []result) []event {
	var evs []event
	var retired []*wire.RetirementEvent
	for _, r := range results {
		c := r.op.consumer
		s := m.cs[c]
		if s == nil {
			continue
		}
		switch r.op.kind {
		case opEnsure, opCheck:
			if r.err != nil {
				s.made = false
				if s.failingSince.IsZero() {
					s.failingSince = now
				}
				s.class = Classify(r.err)
				continue
			}
			if s.owesRecovery {
				reason := wire.RecoveredRestart
				if !s.announced.IsZero() {
					reason = wire.RecoveredSuccess
				}
				s.owesRecovery = false
				evs = append(evs, recovered(c, reason))
			}
			s.failingSince, s.announced = time.Time{}, time.Time{}
			if r.op.kind == opEnsure {
				s.made, s.held = true, true
				if s.retired != nil {
					s.retired = nil
					evs = append(evs, event{wire.EventProvisionerRetirement, wire.RetirementEvent{
						Action: wire.RetirementReenabled, Consumers: []wire.ConsumerRef{c.ref()}, At: now.UTC(),
					}})
				}
			}
		case opRetire:
			if r.err != nil {
				continue
			}
			mk := r.op.mark
			mk.AccessKept = r.accessKept
			s.retired = &mk
			i := slices.IndexFunc(retired, func(e *wire.RetirementEvent) bool {
				return e.Set == r.op.set && e.AccessKept == r.accessKept
			})
			if i < 0 {
				retired = append(retired, &wire.RetirementEvent{
					Action: wire.RetirementRetired, Set: r.op.set, At: mk.At, Why: mk.Why, AccessKept: r.accessKept,
				})
				i = len(retired) - 1
			}
			retired[i].Consumers = append(retired[i].Consumers, c.ref())
		}
	}
	for _, e := range retired {
		evs = append(evs, event{wire.EventProvisionerRetirement, *e})
	}
	return evs
}

// announce says provisioner.failing for each consumer failed for failAfter
// without a success, and again every failEvery while it lasts.
func (m *machine) announce(now time.Time) []event {
	var evs []event
	for _, c := range m.sorted() {
		s := m.cs[c]
		if !s.asked || s.failingSince.IsZero() {
			continue
		}
		due := s.announced.IsZero() && now.Sub(s.failingSince) >= failAfter ||
			!s.announced.IsZero() && now.Sub(s.announced) >= failEvery
		if !due {
			continue
		}
		s.announced = now
		s.owesRecovery = true
		evs = append(evs, event{wire.EventProvisionerFailing, wire.FailingEvent{
			ConsumerRef: c.ref(), Class: s.class, Since: s.failingSince.UTC(),
		}})
	}
	return evs
}

// approve is a person approving the pending set: it answers the calls
// that retire it.
func (m *machine) approve(now time.Time, id string) ([]op, error) {
	set, err := m.pending(id)
	if err != nil {
		return nil, err
	}
	why := fmt.Sprintf("approved by a person (%s); unasked in %d consecutive readings of the contributions file since %s",
		set.reason, set.passes, set.since.UTC().Format(time.RFC3339))
	// The set is decided: the next pass counts afresh whatever is still
	// active and unasked, such as a member whose retirement failed.
	m.set = nil
	return retireOps(set.members, set.id, now, why), nil
}

// reject is a person rejecting the pending set: it stays active, and is
// not put before a person again while it stays the same set.
func (m *machine) reject(now time.Time, id string) ([]Consumer, []event, error) {
	set, err := m.pending(id)
	if err != nil {
		return nil, nil, err
	}
	set.state = wire.SetRejected
	return set.members, []event{{wire.EventProvisionerRetirement, wire.RetirementEvent{
		Action: wire.RetirementRejected, Set: set.id, Consumers: refs(set.members), At: now.UTC(), Why: set.reason,
	}}}, nil
}

func (m *machine) pending(id string) (*unaskedSet, error) {
	if m.set == nil {
		return nil, fmt.Errorf("%w: set %q (no set is waiting)", ErrNoSuchSet, id)
	}
	if m.set.id != id {
		return nil, fmt.Errorf("%w: set %q (the set now unasked is %q, %s)", ErrNoSuchSet, id, m.set.id, m.set.state)
	}
	if m.set.state != wire.SetPending {
		return nil, fmt.Errorf("%w: set %q is %s, not waiting for a person", ErrNoSuchSet, id, m.set.state)
	}
	return m.set, nil
}

// deletable refuses deleting anything but a retired consumer nobody asks
// for.
func (m *machine) deletable(c Consumer) error {
	s := m.cs[c]
	switch {
	case s == nil || !s.held && !s.asked:
		return fmt.Errorf("%w: %s on %s is not held", ErrUnknownConsumer, c.Module, c.Node)
	case s.asked:
		return fmt.Errorf("%w: %s on %s is asked for", ErrNotRetired, c.Module, c.Node)
	case s.retired == nil:
		return fmt.Errorf("%w: %s on %s is active", ErrNotRetired, c.Module, c.Node)
	}
	return nil
}

// deleted records a deletion the Provider made.
func (m *machine) deleted(now time.Time, c Consumer) []event {
	delete(m.cs, c)
	return []event{{wire.EventProvisionerRetirement, wire.RetirementEvent{
		Action: wire.RetirementDeleted, Consumers: []wire.ConsumerRef{c.ref()}, At: now.UTC(),
	}}}
}

// status answers provisioner_retirement.
func (m *machine) status() wire.RetirementStatus {
	st := wire.RetirementStatus{Consumers: []wire.ConsumerStatus{}}
	for _, c := range m.sorted() {
		s := m.cs[c]
		if !s.held && !s.asked {
			continue
		}
		cs := wire.ConsumerStatus{ConsumerRef: c.ref(), State: wire.ConsumerActive, Asked: s.asked}
		if s.retired != nil {
			cs.State, cs.RetiredAt, cs.Why, cs.AccessKept = wire.ConsumerRetired, s.retired.At, s.retired.Why, s.retired.AccessKept
		}
		st.Consumers = append(st.Consumers, cs)
	}
	if set := m.set; set != nil {
		st.Unasked = &wire.UnaskedSet{
			Set: set.id, Consumers: refs(set.members), State: set.state,
			Passes: set.passes, Since: set.since.UTC(), Reason: set.reason,
		}
	}
	return st
}

func recovered(c Consumer, reason string) event {
	return event{wire.EventProvisionerRecovered, wire.RecoveredEvent{ConsumerRef: c.ref(), Reason: reason}}
}

func refs(cs []Consumer) []wire.ConsumerRef {
	out := make([]wire.ConsumerRef, len(cs))
	for i, c := range cs {
		out[i] = c.ref()
	}
	return out
}
