package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrCutover refuses a cutover, the mesh left as it was.
var ErrCutover = errors.New("cutover refused")

// DefaultCutoverWithin is CutoverOptions.Within's default.
const DefaultCutoverWithin = 2 * time.Minute

// CutoverOptions tune a cutover begun.
type CutoverOptions struct {
	// Within bounds how long prepare waits for every node to prove it
	// reaches NATS (one not heard by then stops the cutover, nothing
	// switched), and after how long switch says a node not heard on NATS
	// is overdue; DefaultCutoverWithin when zero.
	Within time.Duration
}

// BeginCutover records a cutover of a mesh on AMQP to the NATS server
// adopted beside its broker (design 25 §9 step 5, docs/decisions/0013),
// which the running controller then drives phase by phase
// (StepCutover). One begun and not ended is joined, not begun twice
// (joined true, the record as it stands). Refused, with nothing
// recorded: a mesh on NATS (one whose cutover completed is said to be),
// a mesh with no server adopted into seat mesh-broker, a server there not
// answering at its monitoring endpoint.
func BeginCutover(ctx context.Context, m *meshdesc.Mesh, st store.Store, dir string, o Options, co CutoverOptions) (c store.Cutover, joined bool, err error) {
	o = o.WithDefaults()
	if co.Within <= 0 {
		co.Within = DefaultCutoverWithin
	}
	last, err := st.Cutover(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Cutover{}, false, err
	}
	if err == nil && !last.Phase.Ended() {
		return last, true, nil
	}
	bus, err := MeshBus(ctx, st)
	if err != nil {
		return store.Cutover{}, false, err
	}
	if bus != AMQP {
		if last.Phase == store.CutoverDone {
			return last, false, fmt.Errorf("%w: cutover %d completed at %s: the mesh is on %s already; nothing changed",
				ErrCutover, last.Generation, last.Ended.Format(time.RFC3339), bus)
		}
		return store.Cutover{}, false, fmt.Errorf("%w: the mesh is on %s since its genesis; a cutover moves a mesh on %s", ErrCutover, bus, AMQP)
	}
	m, err = Described(ctx, m, st)
	if err != nil {
		return store.Cutover{}, false, err
	}
	seats, err := st.Seats(ctx)
	if err != nil {
		return store.Cutover{}, false, err
	}
	seat, ok := seatNamed(seats, wire.BrokerSeat)
	if !ok {
		return store.Cutover{}, false, fmt.Errorf("%w: no NATS server holds seat %s: raise one beside the broker and adopt it first (mesh-controller adopt)", ErrCutover, wire.BrokerSeat)
	}
	v, err := readVarz(ctx, seat.Server)
	if err != nil {
		return store.Cutover{}, false, fmt.Errorf("%w: the server adopted into seat %s: %w", ErrCutover, wire.BrokerSeat, err)
	}
	if v.ServerID != seat.ServerID {
		o.Logger.Warn("the adopted server answers with another id than at adoption (restarted)", "adopted", seat.ServerID, "now", v.ServerID)
	}
	to, err := targetOf(m, NATS, dir)
	if err != nil {
		return store.Cutover{}, false, err
	}
	from, err := targetOf(m, AMQP, dir)
	if err != nil {
		return store.Cutover{}, false, err
	}
	now := o.Now().UTC()
	c = store.Cutover{
		Generation: last.Generation + 1, From: wire.BusAMQP, To: wire.BusNATS,
		Phase: store.CutoverCompose, PhaseSince: now, Begun: now, Within: co.Within,
		Target: store.BusTarget{Addr: to.addr, Fingerprint: to.fingerprint},
		Old:    store.BusTarget{Addr: from.addr, Fingerprint: from.fingerprint},
		Nodes:  map[string]store.CutoverNode{},
	}
	for _, n := range m.Nodes {
		c.Nodes[n.Name] = store.CutoverNode{}
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Cutover(ctx)
		if err == nil && !cur.Phase.Ended() {
			c, joined = cur, true
			return nil
		}
		if err == nil && cur.Generation >= c.Generation {
			return fmt.Errorf("%w: cutover %d was begun meanwhile", ErrCutover, cur.Generation)
		}
		return tx.PutCutover(ctx, c)
	})
	if err != nil {
		return store.Cutover{}, false, err
	}
	if !joined {
		o.Logger.Info("cutover begun", "generation", c.Generation, "from", c.From, "to", c.To, "nodes", len(c.Nodes))
	}
	return c, joined, nil
}

// CutoverBuses are what a cutover asks of the buses, which the running
// controller gives (it imports the bus libraries; this package does not).
type CutoverBuses interface {
	// Login dials the new bus with the credential document and closes:
	// the server let it in, and presented the certificate it pins.
	Login(ctx context.Context, doc []byte) error
	// AssertNew makes the streams and consumers on the new bus the
	// mesh's, as the controller (its two documents retargeted there).
	AssertNew(ctx context.Context, m *meshdesc.Mesh, controller, controllerMesh []byte) error
	// Keep has the declarations kept on every bus the controller listens
	// on.
	Keep(ctx context.Context, decls []wire.Declaration) error
	// Reconnect has the controller connect again to the buses the
	// record's phase needs: both while it is CutoverSwitch and in
	// CutoverRetire until the record says Moved, the new one alone after.
	Reconnect()
	// MoveEvents moves what is left in the consumers' event queues on
	// the old bus onto the new one, and says how many events it moved.
	MoveEvents(ctx context.Context, m *meshdesc.Mesh, c store.Cutover) (int, error)
	// DrainOld says nil once what the controller's own queues on the
	// old bus held (the status words and dead letters said there) is in
	// the store, and why not otherwise.
	DrainOld(ctx context.Context) error
	// RetireOld removes the mesh's side of the old bus: its users,
	// virtual hosts, queues and exchanges, the predecessor's left.
	RetireOld(ctx context.Context, m *meshdesc.Mesh, c store.Cutover) error
}

// loginsAtOnce bounds the logins a compose checks at once: each costs the
// server a bcrypt comparison.
const loginsAtOnce = 8

// StepCutover does what the phase of the cutover in progress asks next,
// at most once through, and returns the record as it then stands; with
// none in progress it does nothing (store.ErrNotFound before the first).
// Every step is idempotent and is decided from the store and the buses
// alone, so a controller killed anywhere and started again resumes
// where the record says.
func StepCutover(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses) (store.Cutover, error) {
	o = o.WithDefaults()
	c, err := st.Cutover(ctx)
	if err != nil || c.Phase.Ended() {
		return c, err
	}
	m, err = Described(ctx, m, st)
	if err != nil {
		return c, err
	}
	switch c.Phase {
	case store.CutoverCompose:
		return composeStep(ctx, m, st, o, b, c)
	case store.CutoverPrepare:
		return prepareStep(ctx, m, st, o, b, c)
	case store.CutoverSwitch:
		return switchStep(ctx, m, st, o, b, c)
	case store.CutoverRetire:
		return retireStep(ctx, m, st, o, b, c)
	}
	return c, fmt.Errorf("cutover %d: phase %q is none this controller knows", c.Generation, c.Phase)
}

// composeStep checks from the new bus's server that every principal
// logs in with its credential retargeted there, and asserts the streams
// and consumers there (every module's durable consumer exists before any
// emitter moves), then declares every node to prepare.
func composeStep(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover) (store.Cutover, error) {
	users, err := st.Credentials(ctx)
	if err != nil {
		return c, err
	}
	docs := map[string][]byte{}
	for _, u := range users {
		doc, err := st.Credential(ctx, u)
		if err != nil {
			return c, err
		}
		if cred, err := wire.ParseCredential(doc); err == nil && cred.Principal == wire.PrincipalEnrol {
			continue // a token's user is the enrolment's, on the bus the mesh is on
		}
		if docs[u], err = Retarget(doc, c.To, c.Target, nil); err != nil {
			return c, err
		}
	}
	if err := loginAll(ctx, b, docs); err != nil {
		return blocked(ctx, st, c, err)
	}
	if err := b.AssertNew(ctx, m, docs[wire.ControllerUser], docs[wire.ControllerMeshUser]); err != nil {
		return blocked(ctx, st, c, fmt.Errorf("assert the streams on %s: %w", c.To, err))
	}
	o.Logger.Info("cutover composed: every principal logs in, the streams are asserted", "generation", c.Generation, "logins", len(docs))
	return advance(ctx, m, st, o, b, c, store.CutoverPrepare, nil)
}

// loginAll logs every document in, loginsAtOnce at a time, and names
// every user refused. The controller's own user goes first, alone: where
// it is not let in (a server that does not answer, a configuration not
// yet loaded) the others would not be either, and trying them would only
// add a login's timeout per loginsAtOnce principals before the cutover
// says why it waits.
func loginAll(ctx context.Context, b CutoverBuses, docs map[string][]byte) error {
	if doc, ok := docs[wire.ControllerUser]; ok {
		if err := b.Login(ctx, doc); err != nil {
			return fmt.Errorf("the controller's own user cannot log in to the new bus, so the other %d principals were not tried: %s: %v", len(docs)-1, wire.ControllerUser, err)
		}
	}
	var (
		mu      sync.Mutex
		refused []string
		wg      sync.WaitGroup
		slots   = make(chan struct{}, loginsAtOnce)
	)
	for u, doc := range docs {
		if u == wire.ControllerUser {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := b.Login(ctx, doc); err != nil {
				mu.Lock()
				refused = append(refused, fmt.Sprintf("%s: %v", u, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(refused) > 0 {
		slices.Sort(refused)
		return fmt.Errorf("%d of %d principals cannot log in to the new bus: %s", len(refused), len(docs), strings.Join(refused, "; "))
	}
	return nil
}

// prepareStep reads every node's last report: applied the declaration
// asking it to prepare, it reached the new bus; refused it, the cutover
// stops, naming it and why; not heard within the bound, it stops too.
func prepareStep(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover) (store.Cutover, error) {
	reports, err := st.Reports(ctx)
	if err != nil {
		return c, err
	}
	var refused, waiting []string
	changed := false
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		n := c.Nodes[name]
		r, ok := reportOf(reports, name)
		switch {
		case !n.Prepared.IsZero():
		case ok && n.Prepare > 0 && r.Report.Applied >= n.Prepare:
			n.Prepared, changed = r.Received, true
		case ok && r.Received.After(c.PhaseSince) && wire.RefusesMove(r.Report.Refused, c.Generation):
			n.Refused, changed = r.Report.Refused, true
		}
		c.Nodes[name] = n
		switch {
		case n.Refused != "":
			refused = append(refused, fmt.Sprintf("%s refused: %s", name, n.Refused))
		case n.Prepared.IsZero():
			waiting = append(waiting, name)
		}
	}
	if len(refused) > 0 {
		return stop(ctx, m, st, o, b, c, "nodes cannot move to "+c.To+": "+strings.Join(refused, "; "))
	}
	if len(waiting) == 0 {
		return switchCommit(ctx, m, st, o, b, c)
	}
	if o.Now().Sub(c.PhaseSince) > c.Within {
		return stop(ctx, m, st, o, b, c, fmt.Sprintf("nodes not heard having reached %s within %s: %s", c.To, c.Within, strings.Join(waiting, ", ")))
	}
	if changed {
		return c, put(ctx, st, c)
	}
	return c, nil
}

// switchCommit is the switch, in one transaction: every credential the
// store holds points at the new bus (so the mesh is on it: MeshBus), and
// every node is declared to switch. The controller then listens on both
// buses (Reconnect).
func switchCommit(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover) (store.Cutover, error) {
	c.Committed = o.Now().UTC()
	return advance(ctx, m, st, o, b, c, store.CutoverSwitch, func(tx store.Tx) error {
		users, err := tx.Credentials(ctx)
		if err != nil {
			return err
		}
		docs := map[string][]byte{}
		for _, u := range users {
			doc, err := tx.Credential(ctx, u)
			if err != nil {
				return err
			}
			if docs[u], err = Retarget(doc, c.To, c.Target, nil); err != nil {
				return err
			}
		}
		changed, err := tx.PutCredentials(ctx, docs)
		o.Logger.Info("cutover switched the credentials", "generation", c.Generation, "to", c.To, "changed", len(changed))
		return err
	})
}

// switchStep waits for every node to be heard on the new bus having
// applied its declaration to switch. A node pushed out of the description
// is no longer waited for; one not heard within the bound is said
// overdue, and still waited for.
func switchStep(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover) (store.Cutover, error) {
	reports, err := st.Reports(ctx)
	if err != nil {
		return c, err
	}
	changed := false
	var waiting []string
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		n := c.Nodes[name]
		if !slices.ContainsFunc(m.Nodes, func(d meshdesc.Node) bool { return d.Name == name }) {
			delete(c.Nodes, name)
			changed = true
			continue
		}
		if r, ok := reportOf(reports, name); ok && n.Switched.IsZero() && n.Switch > 0 && r.Bus == c.To && r.Report.Applied >= n.Switch {
			n.Switched, changed = r.Received, true
			c.Nodes[name] = n
		}
		if n.Switched.IsZero() {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		return advance(ctx, m, st, o, b, c, store.CutoverRetire, nil)
	}
	overdue := ""
	if since := o.Now().Sub(c.PhaseSince); since > c.Within {
		overdue = fmt.Sprintf("not heard on %s %s after the switch (bound %s): %s", c.To, since.Round(time.Second), c.Within, strings.Join(waiting, ", "))
	}
	if changed || overdue != c.Blocked {
		c.Blocked = overdue
		return c, put(ctx, st, c)
	}
	return c, nil
}

// retireStep moves what is left in the consumers' queues on the old bus
// onto the new one, waits until the controller's own queues there (status,
// dead letters) are folded into the store, and records that it did; then
// (the controller no longer listening there) removes the mesh's side
// of the old bus (its users first: a retirement begun leaves nothing to
// move from, so the move is never tried again after it), then ends the
// cutover: the declarations no longer ask anyone to move.
func retireStep(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover) (store.Cutover, error) {
	if c.Moved.IsZero() {
		n, err := b.MoveEvents(ctx, m, c)
		if err != nil {
			return blocked(ctx, st, c, fmt.Errorf("move the events left on %s: %w", c.From, err))
		}
		o.Logger.Info("cutover moved the events left on the old bus", "generation", c.Generation, "from", c.From, "events", n)
		if err := b.DrainOld(ctx); err != nil {
			return blocked(ctx, st, c, fmt.Errorf("fold what the controller's queues on %s hold: %w", c.From, err))
		}
		c.Moved = o.Now().UTC()
		if err := put(ctx, st, c); err != nil {
			return c, err
		}
		// The controller stops listening on the old bus before the
		// mesh's side of it is removed, at the next step.
		b.Reconnect()
		return c, nil
	}
	if err := b.RetireOld(ctx, m, c); err != nil {
		return blocked(ctx, st, c, fmt.Errorf("retire the mesh's side of %s: %w", c.From, err))
	}
	c.Ended = o.Now().UTC()
	return advance(ctx, m, st, o, b, c, store.CutoverDone, nil)
}

// stop ends a cutover that cannot go on, nothing switched: the
// declarations no longer ask anyone to move.
func stop(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover, why string) (store.Cutover, error) {
	o.Logger.Warn("cutover stopped; the mesh stays on "+c.From, "generation", c.Generation, "why", why)
	c.Stopped, c.Ended = why, o.Now().UTC()
	return advance(ctx, m, st, o, b, c, store.CutoverStopped, nil)
}

// advance moves the record to phase in one transaction with what also
// does, and the declarations the phase asks for (Declare reads the
// record), which the buses are then given to keep; a phase that changes
// the buses the controller listens on has it connect again. A record
// changed meanwhile (another controller stepped it) is left as it is.
func advance(ctx context.Context, m *meshdesc.Mesh, st store.Store, o Options, b CutoverBuses, c store.Cutover, phase store.CutoverPhase, also func(tx store.Tx) error) (store.Cutover, error) {
	from := c.Phase
	c.Phase, c.PhaseSince, c.Blocked = phase, o.Now().UTC(), ""
	var decls []wire.Declaration
	err := st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Cutover(ctx)
		if err != nil {
			return err
		}
		if cur.Generation != c.Generation || cur.Phase != from {
			return fmt.Errorf("cutover %d moved to %s meanwhile", cur.Generation, cur.Phase)
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if err := tx.PutCutover(ctx, c); err != nil {
			return err
		}
		if decls, _, err = Declare(ctx, tx, m); err != nil {
			return err
		}
		for _, d := range decls {
			n, ok := c.Nodes[d.Node]
			if !ok || d.Move == nil {
				continue
			}
			if d.Move.Switch {
				n.Switch = d.Revision
			} else {
				n.Prepare = d.Revision
			}
			c.Nodes[d.Node] = n
		}
		return tx.PutCutover(ctx, c)
	})
	if err != nil {
		return c, err
	}
	o.Logger.Info("cutover phase", "generation", c.Generation, "phase", c.Phase)
	if err := b.Keep(ctx, decls); err != nil {
		// The guard puts them on the bus again at its next sweep.
		o.Logger.Warn("cutover: the declarations wait to be kept on the bus", "err", err)
	}
	if phase == store.CutoverSwitch {
		// The controller connects again, to both buses; it leaves the
		// old one in retire, once what was left there is moved.
		b.Reconnect()
	}
	return c, nil
}

// blocked records what the phase could not do, and returns it.
func blocked(ctx context.Context, st store.Store, c store.Cutover, err error) (store.Cutover, error) {
	if c.Blocked != err.Error() {
		c.Blocked = err.Error()
		if perr := put(ctx, st, c); perr != nil {
			return c, errors.Join(err, perr)
		}
	}
	return c, err
}

// put replaces the record if it is still the same cutover's, in the same
// phase.
func put(ctx context.Context, st store.Store, c store.Cutover) error {
	return st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Cutover(ctx)
		if err != nil {
			return err
		}
		if cur.Generation != c.Generation || cur.Phase != c.Phase {
			return fmt.Errorf("cutover %d moved to %s meanwhile", cur.Generation, cur.Phase)
		}
		return tx.PutCutover(ctx, c)
	})
}

// moveOf is what the declarations ask of a node while c stands.
func moveOf(c store.Cutover, node string) *wire.Move {
	if _, ok := c.Nodes[node]; !ok {
		return nil
	}
	switch c.Phase {
	case store.CutoverPrepare:
		return &wire.Move{Generation: c.Generation, Bus: c.To}
	case store.CutoverSwitch, store.CutoverRetire:
		return &wire.Move{Generation: c.Generation, Bus: c.To, Switch: true}
	}
	return nil
}

func reportOf(reports []store.Reported, node string) (store.Reported, bool) {
	i := slices.IndexFunc(reports, func(r store.Reported) bool { return r.Report.Node == node })
	if i < 0 {
		return store.Reported{}, false
	}
	return reports[i], true
}

// OldControllerCredentials are the controller's two credential documents
// pointing at the bus a cutover moves from: what the controller listens
// to the nodes not moved yet with, during the switch.
func OldControllerCredentials(ctx context.Context, m *meshdesc.Mesh, st store.Reader, c store.Cutover) (controller, controllerMesh []byte, err error) {
	var docs [2][]byte
	for i, u := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		if docs[i], err = OldCredential(ctx, m, st, c, u); err != nil {
			return nil, nil, err
		}
	}
	return docs[0], docs[1], nil
}

// OldCredential is user's credential document pointing at the bus a
// cutover moves from, whichever bus the store's points at now.
func OldCredential(ctx context.Context, m *meshdesc.Mesh, st store.Reader, c store.Cutover, user string) ([]byte, error) {
	doc, err := st.Credential(ctx, user)
	if err != nil {
		return nil, err
	}
	return Retarget(doc, c.From, c.Old, amqpdefs.ControlUsers(m))
}

// AMQPEndpoint is the management API of m's broker.
func AMQPEndpoint(m *meshdesc.Mesh) string {
	return "http://" + net.JoinHostPort(m.AMQP.Management, strconv.Itoa(m.AMQP.ManagementPort))
}

// AMQPRetire removes vhosts and users from the broker through its
// management API at endpoint as user, and says what it removed
// (amqpadmin.RetireAs); what is not there is no error.
type AMQPRetire func(ctx context.Context, endpoint, user, password string, vhosts, users []string) (string, error)

// RetireAMQP removes the mesh's side of its broker: the mesh's two
// virtual hosts (with every queue, exchange, binding and grant in them)
// and every user of the mesh's, which are the store's principals. Left:
// the predecessor's users and virtual hosts, which the mesh never
// composed, and the controller's administrator, which observes the
// compatibility broker's clients until it retires.
func RetireAMQP(ctx context.Context, m *meshdesc.Mesh, st store.Reader, o Options) error {
	o = o.WithDefaults()
	if o.AMQPRetire == nil || m.AMQP == nil {
		return fmt.Errorf("this program cannot reach the broker's management API to retire the mesh's side of it")
	}
	secrets, err := st.Secrets(ctx)
	if err != nil {
		return err
	}
	admin, ok := secrets[wire.AMQPAdminUser]
	if !ok {
		return fmt.Errorf("the store holds no secret of the broker's administrator %s", wire.AMQPAdminUser)
	}
	var users []string
	for _, u := range slices.Sorted(maps.Keys(secrets)) {
		if u != wire.AMQPAdminUser {
			users = append(users, u)
		}
	}
	endpoint := AMQPEndpoint(m)
	changed, err := o.AMQPRetire(ctx, endpoint, wire.AMQPAdminUser, admin.Password, []string{wire.AMQPVhost, wire.AMQPControlVhost}, users)
	if err != nil {
		return fmt.Errorf("the management API at %s as %s: %w", endpoint, wire.AMQPAdminUser, err)
	}
	o.Logger.Info("the mesh's side of the broker retired", "endpoint", endpoint, "changes", changed)
	return nil
}
