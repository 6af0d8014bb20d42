package rollout_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// The cutover's phases decided from the store and the buses alone
// (docs/decisions/0013-cutover.md), against the adopted server raised in
// this process: the logins are real, the nodes' reports are written into
// the store as the controller would take them, and the clock is the
// test's.

// fakeCutoverBuses logs in for real and records the rest.
type fakeCutoverBuses struct {
	mu         sync.Mutex
	refuse     string // a user whose login is refused, as if its account were not composed
	logins     int    // the logins tried
	kept       [][]wire.Declaration
	reconnects int
	moves      int
	drains     int
	undrained  error // what DrainOld says; nil: drained
	retired    int
}

func (f *fakeCutoverBuses) Login(ctx context.Context, doc []byte) error {
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	refuse := f.refuse
	f.logins++
	f.mu.Unlock()
	if cred.User() == refuse {
		return errAuthorization
	}
	return buses.Login(ctx, cred)
}

var errAuthorization = errorString("nats: authorization violation")

type errorString string

func (e errorString) Error() string { return string(e) }

func (f *fakeCutoverBuses) AssertNew(context.Context, *meshdesc.Mesh, []byte, []byte) error {
	return nil
}

func (f *fakeCutoverBuses) Keep(_ context.Context, decls []wire.Declaration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kept = append(f.kept, decls)
	return nil
}

func (f *fakeCutoverBuses) Reconnect() { f.mu.Lock(); f.reconnects++; f.mu.Unlock() }

func (f *fakeCutoverBuses) MoveEvents(context.Context, *meshdesc.Mesh, store.Cutover) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves++
	return 0, nil
}

// DrainOld says the controller's queues on the old bus are folded unless
// the test says what still waits there (undrained).
func (f *fakeCutoverBuses) DrainOld(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains++
	return f.undrained
}

func (f *fakeCutoverBuses) RetireOld(context.Context, *meshdesc.Mesh, store.Cutover) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retired++
	return nil
}

// cutoverBed is an adopted mesh on AMQP, a clock and the fake buses.
type cutoverBed struct {
	*beside
	now   time.Time
	o     rollout.Options
	buses *fakeCutoverBuses
}

func newCutoverBed(t *testing.T) *cutoverBed {
	t.Helper()
	b := raiseBeside(t)
	if _, err := b.adopt(t, rollout.AdoptOptions{}); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	cb := &cutoverBed{beside: b, now: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), buses: &fakeCutoverBuses{}}
	cb.o = rollout.Options{Now: func() time.Time { return cb.now }, Logger: controllertest.Logger(t)}
	return cb
}

func (cb *cutoverBed) begin(t *testing.T, within time.Duration) store.Cutover {
	t.Helper()
	c, joined, err := rollout.BeginCutover(controllertest.Ctx(t), cb.m, cb.st, cb.dir, cb.o, rollout.CutoverOptions{Within: within})
	if err != nil || joined {
		t.Fatalf("expected a cutover begun, got joined %v: %v", joined, err)
	}
	return c
}

func (cb *cutoverBed) step(t *testing.T) store.Cutover {
	t.Helper()
	c, _ := rollout.StepCutover(controllertest.Ctx(t), cb.m, cb.st, cb.o, cb.buses)
	return c
}

// report writes a node's report as the controller takes it from bus.
func (cb *cutoverBed) report(t *testing.T, node, bus string, applied uint64, refused string) {
	t.Helper()
	ctx := controllertest.Ctx(t)
	r := store.Reported{Report: wire.Report{Node: node, ID: node + time.Now().String(), At: cb.now, Applied: applied, Refused: refused}, Received: cb.now, Bus: bus}
	if err := cb.st.Update(ctx, func(tx store.Tx) error { return tx.PutReport(ctx, r) }); err != nil {
		t.Fatal(err)
	}
}

// declared are the declarations the store holds, by node.
func (cb *cutoverBed) declared(t *testing.T) map[string]wire.Declaration {
	t.Helper()
	decls, err := cb.st.Declared(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.Declaration{}
	for _, d := range decls {
		out[d.Node] = d
	}
	return out
}

// onAMQPStill: the mesh is on AMQP, every credential names the broker,
// and no declaration asks a node to move.
func (cb *cutoverBed) onAMQPStill(t *testing.T) {
	t.Helper()
	ctx := controllertest.Ctx(t)
	if bus, err := rollout.MeshBus(ctx, cb.st); err != nil || bus != rollout.AMQP {
		t.Fatalf("expected the mesh on AMQP still, got %q: %v", bus, err)
	}
	users, err := cb.st.Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		doc, err := cb.st.Credential(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := wire.ParseCredential(doc); err != nil || wire.BusOfScheme(c.Scheme()) != wire.BusAMQP && c.Principal != wire.PrincipalEnrol {
			t.Fatalf("expected %s's credential on the broker still, got scheme %q: %v", u, c.Scheme(), err)
		}
	}
	for node, d := range cb.declared(t) {
		if d.Move != nil {
			t.Fatalf("expected %s's declaration to ask no move after the cutover stopped, it asks %+v", node, *d.Move)
		}
	}
}

// prepared runs compose and returns the record in prepare, every node
// declared to prove it reaches NATS.
func (cb *cutoverBed) prepared(t *testing.T, within time.Duration) store.Cutover {
	t.Helper()
	cb.begin(t, within)
	c := cb.step(t)
	if c.Phase != store.CutoverPrepare {
		t.Fatalf("expected compose to log every principal in and move to prepare, got %s (blocked: %s)", c.Phase, c.Blocked)
	}
	for node, d := range cb.declared(t) {
		if d.Move == nil || d.Move.Switch || d.Move.Bus != wire.BusNATS || c.Nodes[node].Prepare != d.Revision {
			t.Fatalf("expected %s declared to prepare at the revision the record holds (%d), got revision %d move %+v", node, c.Nodes[node].Prepare, d.Revision, d.Move)
		}
	}
	return c
}

// TestComposeWaitsForEveryPrincipalToLogIn: a principal the server
// refuses holds the cutover in compose, named in Blocked; once it logs in
// the cutover goes on. Nothing is declared meanwhile.
func TestComposeWaitsForEveryPrincipalToLogIn(t *testing.T) {
	cb := newCutoverBed(t)
	cb.buses.refuse = wire.HostUser("node-b")
	cb.begin(t, time.Minute)
	c := cb.step(t)
	if c.Phase != store.CutoverCompose || !strings.Contains(c.Blocked, "1 of") || !strings.Contains(c.Blocked, wire.HostUser("node-b")+": nats: authorization violation") {
		t.Fatalf("expected compose held, naming %s refused, got %s: %q", wire.HostUser("node-b"), c.Phase, c.Blocked)
	}
	cb.onAMQPStill(t)
	cb.buses.refuse = ""
	if c = cb.step(t); c.Phase != store.CutoverPrepare || c.Blocked != "" {
		t.Fatalf("expected prepare once every principal logs in, got %s: %q", c.Phase, c.Blocked)
	}
}

// TestComposeTriesTheControllerFirst: where the controller's own user is
// not let in, compose says so and tries no other principal (a server that
// does not answer would make each wait out a login's timeout); let in, it
// tries every one.
func TestComposeTriesTheControllerFirst(t *testing.T) {
	cb := newCutoverBed(t)
	cb.buses.refuse = wire.ControllerUser
	cb.begin(t, time.Minute)
	c := cb.step(t)
	if c.Phase != store.CutoverCompose || !strings.Contains(c.Blocked, "the controller's own user cannot log in") || !strings.Contains(c.Blocked, "nats: authorization violation") {
		t.Fatalf("expected compose held, naming the controller's user refused, got %s: %q", c.Phase, c.Blocked)
	}
	if cb.buses.logins != 1 {
		t.Fatalf("expected the controller's login alone tried, got %d logins", cb.buses.logins)
	}
	cb.buses.refuse = ""
	cb.buses.logins = 0
	if c = cb.step(t); c.Phase != store.CutoverPrepare || c.Blocked != "" {
		t.Fatalf("expected prepare once the controller logs in, got %s: %q", c.Phase, c.Blocked)
	}
	users, err := cb.st.Credentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cb.buses.logins < 2 || cb.buses.logins > len(users) {
		t.Fatalf("expected every principal but tokens' tried once, got %d logins of %d users", cb.buses.logins, len(users))
	}
}

// TestPrepareStopsNamingANodeNotHeard: one node proves it reaches NATS,
// the other is not heard within the bound: the cutover stops naming it,
// nothing switched, the mesh on AMQP with no declaration asking a move.
func TestPrepareStopsNamingANodeNotHeard(t *testing.T) {
	cb := newCutoverBed(t)
	c := cb.prepared(t, 30*time.Second)
	cb.report(t, "node-a", wire.BusAMQP, c.Nodes["node-a"].Prepare, "")
	cb.now = cb.now.Add(10 * time.Second)
	if c = cb.step(t); c.Phase != store.CutoverPrepare || c.Nodes["node-a"].Prepared.IsZero() || !c.Nodes["node-b"].Prepared.IsZero() {
		t.Fatalf("expected node-a prepared and node-b waited for, got %s %+v", c.Phase, c.Nodes)
	}
	cb.now = cb.now.Add(30 * time.Second)
	c = cb.step(t)
	if c.Phase != store.CutoverStopped || c.Stopped != "nodes not heard having reached nats within 30s: node-b" || c.Ended.IsZero() {
		t.Fatalf("expected the cutover stopped naming node-b, got %s: %q", c.Phase, c.Stopped)
	}
	cb.onAMQPStill(t)
	if cb.buses.reconnects != 0 || cb.buses.retired != 0 {
		t.Fatalf("expected nothing switched nor retired, got %d reconnects, %d retirements", cb.buses.reconnects, cb.buses.retired)
	}
	// Begun again, it is the next generation, from compose.
	if next := cb.begin(t, time.Minute); next.Generation != 2 || next.Phase != store.CutoverCompose {
		t.Fatalf("expected cutover 2 begun in compose, got %d %s", next.Generation, next.Phase)
	}
}

// TestPrepareStopsOnAHostThatCannotMove: a host on a binary older than
// the cutover refuses a declaration with a move in it (its strict parse
// knows no such field); the cutover stops before anything switches,
// naming it and why.
func TestPrepareStopsOnAHostThatCannotMove(t *testing.T) {
	cb := newCutoverBed(t)
	c := cb.prepared(t, time.Minute)
	cb.report(t, "node-a", wire.BusAMQP, c.Nodes["node-a"].Prepare, "")
	cb.now = cb.now.Add(time.Second)
	old := `declaration of node-b: json: unknown field "move"`
	cb.report(t, "node-b", wire.BusAMQP, c.Nodes["node-b"].Prepare-1, old)
	c = cb.step(t)
	if c.Phase != store.CutoverStopped || !strings.Contains(c.Stopped, "node-b refused: "+old) || strings.Contains(c.Stopped, "node-a") {
		t.Fatalf("expected the cutover stopped naming node-b and why, got %s: %q", c.Phase, c.Stopped)
	}
	cb.onAMQPStill(t)
	// And a host that could not reach NATS says so in its own words.
	cb.begin(t, time.Minute)
	c = cb.step(t)
	cb.now = cb.now.Add(time.Second)
	cb.report(t, "node-a", wire.BusAMQP, c.Nodes["node-a"].Prepare-1, wire.MoveRefusal(c.Generation, wire.BusNATS, "dial: connection refused"))
	if c = cb.step(t); c.Phase != store.CutoverStopped || !strings.Contains(c.Stopped, "node-a refused: ") || !strings.Contains(c.Stopped, "connection refused") {
		t.Fatalf("expected cutover 2 stopped naming node-a, got %s: %q", c.Phase, c.Stopped)
	}
}

// TestSwitchWaitsForAStragglerAndEndsWithoutANodePushedOut: every node
// prepared, the switch retargets every credential at once and declares
// each node to switch; a node not heard on NATS past the bound is named
// overdue and still waited for; heard there, it is switched; a node
// pushed out of the description is no longer waited for. Then the old
// bus is retired and the cutover is done.
func TestSwitchWaitsForAStragglerAndEndsWithoutANodePushedOut(t *testing.T) {
	cb := newCutoverBed(t)
	ctx := controllertest.Ctx(t)
	c := cb.prepared(t, 20*time.Second)
	for _, node := range []string{"node-a", "node-b"} {
		cb.report(t, node, wire.BusAMQP, c.Nodes[node].Prepare, "")
	}
	cb.now = cb.now.Add(time.Second)
	c = cb.step(t)
	if c.Phase != store.CutoverSwitch || cb.buses.reconnects != 1 || !c.Committed.Equal(cb.now) {
		t.Fatalf("expected the switch, and the controller told to listen on both buses, got %s after %d reconnects", c.Phase, cb.buses.reconnects)
	}
	if bus, err := rollout.MeshBus(ctx, cb.st); err != nil || bus != rollout.NATS {
		t.Fatalf("expected every credential on NATS from the switch on, got %q: %v", bus, err)
	}
	for node, d := range cb.declared(t) {
		if d.Move == nil || !d.Move.Switch || c.Nodes[node].Switch != d.Revision {
			t.Fatalf("expected %s declared to switch at the revision the record holds, got revision %d move %+v", node, d.Revision, d.Move)
		}
	}
	if last := cb.buses.kept[len(cb.buses.kept)-1]; len(last) != 2 {
		t.Fatalf("expected the switch's declarations given to the buses to keep, got %d", len(last))
	}

	// node-a reports on AMQP first (its report before it moved): not
	// switched; then on NATS.
	cb.report(t, "node-a", wire.BusAMQP, c.Nodes["node-a"].Switch, "")
	if c = cb.step(t); !c.Nodes["node-a"].Switched.IsZero() {
		t.Fatal("expected a report on AMQP not to count as switched")
	}
	cb.now = cb.now.Add(time.Second)
	cb.report(t, "node-a", wire.BusNATS, c.Nodes["node-a"].Switch, "")
	if c = cb.step(t); c.Nodes["node-a"].Switched.IsZero() || c.Phase != store.CutoverSwitch {
		t.Fatalf("expected node-a switched, the cutover waiting for node-b, got %s %+v", c.Phase, c.Nodes)
	}
	cb.now = cb.now.Add(30 * time.Second)
	if c = cb.step(t); c.Phase != store.CutoverSwitch || !strings.Contains(c.Blocked, "not heard on nats 31s after the switch (bound 20s): node-b") {
		t.Fatalf("expected node-b named overdue and waited for, got %s: %q", c.Phase, c.Blocked)
	}

	// The operator pushes a description without node-b: no longer waited for.
	without := *cb.m
	without.Nodes = slices.DeleteFunc(slices.Clone(cb.m.Nodes), func(n meshdesc.Node) bool { return n.Name == "node-b" })
	res, err := rollout.Apply(ctx, controllertest.Revalidate(t, &without), cb.st, cb.dir, cb.o)
	if err != nil {
		t.Fatalf("apply without node-b: %v (%+v)", err, res)
	}
	cb.m = controllertest.Revalidate(t, &without)
	if c = cb.step(t); c.Phase != store.CutoverRetire {
		t.Fatalf("expected retire once node-b is no longer described, got %s: %q %+v", c.Phase, c.Blocked, c.Nodes)
	}
	// What the controller's own queues on the old bus hold is folded
	// into the store before anything there is removed.
	cb.buses.undrained = errors.New("1 status words or dead letters wait in the controller's queues on the old bus")
	if c = cb.step(t); c.Phase != store.CutoverRetire || !c.Moved.IsZero() || cb.buses.retired != 0 || !strings.Contains(c.Blocked, "1 status words or dead letters wait") {
		t.Fatalf("expected retire held while the controller's queues on the old bus are not folded, got %s, moved %v, %d retirements, blocked %q", c.Phase, c.Moved, cb.buses.retired, c.Blocked)
	}
	cb.buses.undrained = nil
	if c = cb.step(t); c.Phase != store.CutoverRetire || c.Moved.IsZero() || cb.buses.retired != 0 || cb.buses.reconnects != 2 {
		t.Fatalf("expected the move recorded, the controller told to leave the old bus, nothing retired yet, got %s, moved %v, %d retirements, %d reconnects", c.Phase, c.Moved, cb.buses.retired, cb.buses.reconnects)
	}
	if c = cb.step(t); c.Phase != store.CutoverDone || cb.buses.moves != 2 || cb.buses.retired != 1 || cb.buses.reconnects != 2 {
		t.Fatalf("expected done after the events left were moved (twice: the first try was held) and one retirement, got %s, %d moves, %d retirements, %d reconnects",
			c.Phase, cb.buses.moves, cb.buses.retired, cb.buses.reconnects)
	}
	for node, d := range cb.declared(t) {
		if d.Move != nil {
			t.Fatalf("expected %s's declaration to ask no move once the cutover is done, got %+v", node, *d.Move)
		}
	}
	// A step after the end changes nothing.
	if again := cb.step(t); again.Phase != store.CutoverDone || !again.Ended.Equal(c.Ended) {
		t.Fatalf("expected a step after the end to change nothing, got %s", again.Phase)
	}
}

// TestAStragglerHeardLateSwitches: the node overdue comes back on NATS
// and switches; the cutover then ends.
func TestAStragglerHeardLateSwitches(t *testing.T) {
	cb := newCutoverBed(t)
	c := cb.prepared(t, 5*time.Second)
	for _, node := range []string{"node-a", "node-b"} {
		cb.report(t, node, wire.BusAMQP, c.Nodes[node].Prepare, "")
	}
	c = cb.step(t)
	cb.report(t, "node-a", wire.BusNATS, c.Nodes["node-a"].Switch, "")
	cb.now = cb.now.Add(time.Minute)
	if c = cb.step(t); !strings.Contains(c.Blocked, "node-b") {
		t.Fatalf("expected node-b overdue, got %q", c.Blocked)
	}
	cb.report(t, "node-b", wire.BusNATS, c.Nodes["node-b"].Switch, "")
	if c = cb.step(t); c.Phase != store.CutoverRetire || c.Blocked != "" {
		t.Fatalf("expected retire once node-b is heard on NATS, got %s: %q", c.Phase, c.Blocked)
	}
}

// TestAPersonIssuedBeforeTheSwitchIsNamedToBeIssuedAgain: a person keeps
// the credential sealed to it at issue, which names the broker until the
// switch: one issued before the switch is named, with the command that
// issues it again as it was (its tools, its key); one issued after is
// not; before the switch nobody is.
func TestAPersonIssuedBeforeTheSwitchIsNamedToBeIssuedAgain(t *testing.T) {
	cb := newCutoverBed(t)
	ctx := controllertest.Ctx(t)
	key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := seal.EncodePublic(key.Public)
	// The bed has no broker: what a person's issue makes live there is
	// taken as made.
	o := cb.o
	o.AMQPAdmin = func(context.Context, string, string, string, amqpdefs.Definitions) (string, error) { return "", nil }
	if _, err := rollout.IssuePerson(ctx, cb.m, cb.st, cb.dir, "early", []string{"sensor.calibrate"}, pub, o); err != nil {
		t.Fatal(err)
	}
	// The server reloads what the issue composed: compose's logins are
	// tried again until it has.
	cb.begin(t, 20*time.Second)
	var c store.Cutover
	controllertest.Eventually(t, 10*time.Second, "the cutover in prepare", func() bool {
		c = cb.step(t)
		return c.Phase == store.CutoverPrepare
	})
	if persons, err := rollout.PersonsToIssueAgain(ctx, cb.st, c); err != nil || len(persons) != 0 {
		t.Fatalf("expected nobody to issue again before the switch, got %v: %v", persons, err)
	}
	for _, node := range []string{"node-a", "node-b"} {
		cb.report(t, node, wire.BusAMQP, c.Nodes[node].Prepare, "")
	}
	cb.now = cb.now.Add(time.Second)
	if c = cb.step(t); c.Phase != store.CutoverSwitch {
		t.Fatalf("expected the switch, got %s: %s", c.Phase, c.Blocked)
	}
	cb.now = cb.now.Add(time.Second)
	if _, err := rollout.IssuePerson(ctx, cb.m, cb.st, cb.dir, "late", []string{"sensor.calibrate"}, pub, o); err != nil {
		t.Fatal(err)
	}
	persons, err := rollout.PersonsToIssueAgain(ctx, cb.st, c)
	if err != nil || len(persons) != 1 || persons[0].Name != "early" {
		t.Fatalf("expected early alone to issue again, got %v: %v", persons, err)
	}
	want := "mesh-controller person issue early --tools sensor.calibrate --key " + pub
	if got := rollout.IssueAgainCommand(persons[0]); got != want {
		t.Fatalf("expected %q, got %q", want, got)
	}
}
