package host

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestJudge: a declaration is taken only after the one applied, by its
// own revision; where the bus keeps it is only named.
func TestJudge(t *testing.T) {
	was := Applied{Declaration: wire.Declaration{Node: "a", Revision: 3}}
	for _, c := range []struct {
		name string
		rev  uint64
		want string
	}{
		{"newer", 4, ""},
		{"an older revision", 2, "revision 2 (NODES sequence 9) is not after 3"},
		{"the same revision", 3, "revision 3 (NODES sequence 9) is not after 3"},
	} {
		got := judge(was, wire.Declaration{Node: "a", Revision: c.rev}, "NODES sequence 9")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: judged %q, want %q", c.name, got, c.want)
		}
	}
	if got := judge(Applied{}, wire.Declaration{Node: "a", Revision: 1}, "queue node.a"); got != "" {
		t.Errorf("the first declaration: refused %q", got)
	}
}

// declaring is a node of the host's reading its declarations from a fake
// bus, and the controller's key that signs them.
type declaring struct {
	t   *testing.T
	n   *node
	bus *fakeBus
	key ed25519.PrivateKey
}

func newDeclaring(t *testing.T) *declaring {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	sealing, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	st := State{Dir: t.TempDir()}
	if err := st.open(); err != nil {
		t.Fatal(err)
	}
	out, err := openOutbox(st)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: "node-a", key: pub, sealing: sealing, state: st, out: out, log: slog.New(slog.DiscardHandler)}
	return &declaring{t: t, n: n, bus: &fakeBus{}, key: priv}
}

// declare makes d, signed, what the bus holds for the node, at position
// pos and where.
func (x *declaring) declare(d wire.Declaration, pos uint64, where string) {
	x.t.Helper()
	body, sig, err := wire.SignDeclaration(x.key, d)
	if err != nil {
		x.t.Fatal(err)
	}
	x.bus.declare(plane.Declared{Body: body, Signature: sig, Position: pos, Where: where})
}

// poll is one poll of the host's loop: the declarations read, the reports
// sent.
func (x *declaring) poll() {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x.n.declarations(ctx, x.bus)
	if err := x.n.out.send(ctx, x.bus); err != nil {
		x.t.Fatal(err)
	}
}

func (x *declaring) applied() uint64 {
	x.t.Helper()
	a, err := x.n.state.Applied()
	if err != nil {
		x.t.Fatal(err)
	}
	return a.Declaration.Revision
}

func decl(rev uint64, modules ...string) wire.Declaration {
	return wire.Declaration{Node: "node-a", Revision: rev, Modules: append([]string{}, modules...)}
}

// TestAReplayedOlderRevisionAtANewerPositionIsRefused: the revision alone
// orders declarations. An older one published again lands where the bus
// keeps it later (a higher NODES sequence, or the one place a queue
// has): it is refused, and reported once however often it is read; a
// newer revision is taken wherever the bus keeps it, a lower position
// included.
func TestAReplayedOlderRevisionAtANewerPositionIsRefused(t *testing.T) {
	x := newDeclaring(t)
	x.declare(decl(2), 5, "NODES sequence 5")
	x.poll()
	if got := x.applied(); got != 2 {
		t.Fatalf("expected revision 2 applied, got %d", got)
	}

	x.declare(decl(1), 9, "NODES sequence 9")
	for range 3 {
		x.poll()
	}
	if got := x.applied(); got != 2 {
		t.Fatalf("a replayed revision 1 replaced revision 2: %d applied", got)
	}
	reports := x.bus.held()
	if len(reports) != 2 || reports[0].Refused != "" || reports[0].Applied != 2 {
		t.Fatalf("expected the application, then one refusal, got %+v", reports)
	}
	if r := reports[1]; r.Applied != 2 || !strings.Contains(r.Refused, "revision 1 (NODES sequence 9) is not after 2") {
		t.Fatalf("expected the refusal to name the revision replayed and where it was read, got %+v", r)
	}

	// A bus that keeps no position: each declaration read is still
	// refused once.
	x.declare(decl(1), 0, "queue node.node-a")
	x.poll()
	x.declare(decl(2, "other"), 0, "queue node.node-a")
	x.poll()
	x.poll()
	reports = x.bus.held()
	if len(reports) != 4 || !strings.Contains(reports[2].Refused, "revision 1 (queue node.node-a)") || !strings.Contains(reports[3].Refused, "revision 2 (queue node.node-a) is not after 2") {
		t.Fatalf("expected two refusals more, one per declaration read, got %+v", reports[2:])
	}

	// A newer revision at a lower position is taken: the position orders
	// nothing.
	x.declare(decl(3), 4, "NODES sequence 4")
	x.poll()
	if got := x.applied(); got != 3 {
		t.Fatalf("expected revision 3 applied at a lower sequence, got %d", got)
	}
	if reports = x.bus.held(); len(reports) != 5 || reports[4].Applied != 3 || reports[4].Refused != "" {
		t.Fatalf("expected revision 3 reported applied, got %+v", reports[4:])
	}
}

// TestTheDeclarationAppliedPublishedAgainIsNoRefusal: the one applied, at
// a later position, its configuration spelled otherwise than the state
// kept it (a controller restarted signs it again from PostgreSQL's
// jsonb), is no refusal and changes nothing; the same revision saying
// something else is refused.
func TestTheDeclarationAppliedPublishedAgainIsNoRefusal(t *testing.T) {
	x := newDeclaring(t)
	withConfig := func(config string) wire.Declaration {
		d := decl(2, "mesh-catalog")
		d.Config = map[string]json.RawMessage{"mesh-catalog": json.RawMessage(config)}
		return d
	}
	if err := x.n.state.PutApplied(Applied{Declaration: withConfig(`{"tools": [{"tool": "calibrate", "module": "sensor"}]}`)}); err != nil {
		t.Fatal(err)
	}
	x.declare(withConfig(`{"tools":[{"module":"sensor","tool":"calibrate"}]}`), 7, "NODES sequence 7")
	x.poll()
	x.declare(withConfig(`{"tools":[{"module":"sensor","tool":"calibrate"}]}`), 0, "queue node.node-a")
	x.poll()
	if reports := x.bus.held(); len(reports) != 0 {
		t.Fatalf("the declaration applied, published again, was reported: %+v", reports)
	}
	x.declare(withConfig(`{"tools":[]}`), 8, "NODES sequence 8")
	x.poll()
	if reports := x.bus.held(); len(reports) != 1 || !strings.Contains(reports[0].Refused, "revision 2 (NODES sequence 8) is not after 2") {
		t.Fatalf("another configuration at the same revision: expected it refused, got %+v", reports)
	}
}

// TestARefusalOfTheBusIsSaidOncePerReason: what the bus refused before it
// could say where it read it (NODES's answer carrying a sequence the
// server did not write) is reported once per reason.
func TestARefusalOfTheBusIsSaidOncePerReason(t *testing.T) {
	x := newDeclaring(t)
	bus := &refusingBus{fakeBus: x.bus, err: fmt.Errorf("%w: the answer carries 2 sequences, not the server's one", wire.ErrDeclaration)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		x.n.declarations(ctx, bus)
	}
	if err := x.n.out.send(ctx, x.bus); err != nil {
		t.Fatal(err)
	}
	if reports := x.bus.held(); len(reports) != 1 || !strings.Contains(reports[0].Refused, "2 sequences") {
		t.Fatalf("expected the refusal reported once, got %+v", reports)
	}
}

type refusingBus struct {
	*fakeBus
	err error
}

func (r *refusingBus) Newest(context.Context, string) (plane.Declared, error) {
	return plane.Declared{}, r.err
}

// TestAnAppliedStateOfTheOlderLayoutIsRead: applied.json as a host before
// the control-plane seam wrote it (with NODES's sequence, "seq") is read
// without error, and its revision still orders what comes.
func TestAnAppliedStateOfTheOlderLayoutIsRead(t *testing.T) {
	x := newDeclaring(t)
	old := `{"seq":41,"declaration":{"node":"node-a","revision":4,"modules":[]}}`
	if err := os.WriteFile(x.n.state.path(appliedFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := x.applied(); got != 4 {
		t.Fatalf("expected revision 4 read from the older state, got %d", got)
	}
	x.declare(decl(3), 50, "NODES sequence 50")
	x.poll()
	x.declare(decl(5), 12, "NODES sequence 12")
	x.poll()
	reports := x.bus.held()
	if len(reports) != 2 || !strings.Contains(reports[0].Refused, "revision 3") || reports[1].Applied != 5 || x.applied() != 5 {
		t.Fatalf("expected revision 3 refused and 5 applied, got %+v (applied %d)", reports, x.applied())
	}
}

// TestAQueueMissingIsWaitedForNotRefused: a node's declaration queue not
// on the bus (plane.ErrMissing: the controller has not asserted it yet,
// or an operator deleted it) is no declaration to refuse: the host
// reports nothing, keeps what it applied, and takes the newest once the
// queue is back.
func TestAQueueMissingIsWaitedForNotRefused(t *testing.T) {
	x := newDeclaring(t)
	x.declare(decl(1), 0, "queue node.node-a")
	x.poll()
	missing := &refusingBus{fakeBus: x.bus, err: fmt.Errorf("read node.node-a: %w: Exception (404) Reason: \"NOT_FOUND - no queue 'node.node-a' in vhost 'control'\"", plane.ErrMissing)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		x.n.declarations(ctx, missing)
	}
	if err := x.n.out.send(ctx, x.bus); err != nil {
		t.Fatal(err)
	}
	if reports := x.bus.held(); len(reports) != 1 || reports[0].Applied != 1 || reports[0].Refused != "" {
		t.Fatalf("expected only revision 1's application reported, no refusal for a queue missing, got %+v", reports)
	}
	if got := x.applied(); got != 1 {
		t.Fatalf("expected revision 1 kept while the queue is missing, got %d", got)
	}
	x.declare(decl(2), 0, "queue node.node-a")
	x.poll()
	if got := x.applied(); got != 2 {
		t.Fatalf("expected revision 2 taken once the queue is back, got %d", got)
	}
}
