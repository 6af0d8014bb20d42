package control

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// startHost enrols node with a token and runs its host until the test
// ends.
func (l *living) startHost(node string) host.State {
	t := l.T
	t.Helper()
	testutil.RequireRoot(t)
	token := l.Issue(node)
	dir := testutil.OpenTempDir(t)
	tokenFile := filepath.Join(dir, "token.json")
	if err := os.WriteFile(tokenFile, token.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	state := host.State{Dir: filepath.Join(dir, "state")}
	if l.programs == nil {
		l.programs = map[string]string{}
	}
	l.programs[node] = programs(t)
	t.Cleanup(l.runHost(node, state, tokenFile))
	return state
}

// runHost runs node's host on state until the returned stop is called.
func (l *living) runHost(node string, state host.State, tokenFile string) (stop func()) {
	log := controllertest.Logger(l.T).With("node", node)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- host.Run(ctx, host.Options{State: state, TokenFile: tokenFile, Programs: l.programs[node], Heartbeat: time.Second, Poll: 50 * time.Millisecond, Logger: log})
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				l.T.Errorf("host %s: %v", node, err)
			}
		})
	}
}

// TestAHostStartedWithoutAModulesCredentialFetchesItAgain: a host killed
// before it kept a module's credential (or whose state is of a layout
// before modules had directories of their own) finds the declaration it
// applied without it, and fetches it again before it runs the module.
func TestAHostStartedWithoutAModulesCredentialFetchesItAgain(t *testing.T) {
	l := newLiving(t)
	testutil.RequireRoot(t)
	dir := testutil.OpenTempDir(t)
	tokenFile := filepath.Join(dir, "token.json")
	if err := os.WriteFile(tokenFile, l.Issue("node-a").Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	state := host.State{Dir: filepath.Join(dir, "state")}
	l.programs = map[string]string{"node-a": programs(t)}
	stop := l.runHost("node-a", state, tokenFile)
	l.reported("node-a", 1, "")
	stop()
	if err := os.Remove(state.ModuleCredential("sensor")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.runHost("node-a", state, tokenFile))
	controllertest.Eventually(t, 10*time.Second, "sensor's credential fetched again", func() bool {
		data, err := os.ReadFile(state.ModuleCredential("sensor"))
		if err != nil {
			return false
		}
		c, err := wire.ParseCredential(data)
		return err == nil && c.User() == wire.ModuleUser("node-a", "sensor")
	})
}

// reported waits for node's last report in the store to say applied
// revision rev (and refused, when refused is not empty).
func (l *living) reported(node string, rev uint64, refused string) store.Reported {
	l.T.Helper()
	var got store.Reported
	controllertest.Eventually(l.T, 15*time.Second, node+" reports revision", func() bool {
		reps, err := l.St.Reports(controllertest.Ctx(l.T))
		if err != nil {
			return false
		}
		for _, r := range reps {
			if r.Report.Node == node && r.Report.Applied == rev && strings.Contains(r.Report.Refused, refused) && (refused == "") == (r.Report.Refused == "") {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

func (l *living) push(m *meshdesc.Mesh) {
	l.T.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		l.T.Fatal(err)
	}
	if _, err := rollout.SendPush(controllertest.Ctx(l.T), l.St, data); err != nil {
		l.T.Fatal(err)
	}
}

// TestAnUpgradeRollsOutToTwoNodes: a push changing a module's version
// gives the nodes it runs on their next revision; each host applies it
// and reports running the new version.
func TestAnUpgradeRollsOutToTwoNodes(t *testing.T) {
	l := newLiving(t)
	m := *l.M
	m.Modules = append([]meshdesc.Module(nil), l.M.Modules...)
	m.Nodes = append([]meshdesc.Node(nil), l.M.Nodes...)
	for i := range m.Nodes {
		if m.Nodes[i].Name == "node-b" {
			m.Nodes[i].Modules = append(append([]string(nil), m.Nodes[i].Modules...), "sensor")
		}
	}
	l.push(controllertest.Revalidate(t, &m))
	l.startHost("node-a")
	hostB := l.startHost("node-b")
	l.reported("node-a", 1, "")
	l.reported("node-b", 2, "")
	// node-b runs logger and sensor: each has its own credential, 0600,
	// fetched from the controller, never read from a declaration.
	for _, mod := range []string{"logger", "sensor"} {
		data, err := os.ReadFile(hostB.ModuleCredential(mod))
		if err != nil {
			t.Fatalf("node-b's %s credential: %v", mod, err)
		}
		c, err := wire.ParseCredential(data)
		if err != nil || c.User() != wire.ModuleUser("node-b", mod) {
			t.Fatalf("node-b's %s credential is %s's (%v)", mod, c.User(), err)
		}
		if info, _ := os.Stat(hostB.ModuleCredential(mod)); info.Mode().Perm() != 0o440 {
			t.Errorf("node-b's %s credential has mode %v, want 0440 (its module's group alone may read it)", mod, info.Mode().Perm())
		}
	}

	for i := range m.Modules {
		if m.Modules[i].Name == "sensor" {
			m.Modules[i].Version = "2.0.0"
		}
	}
	start := time.Now()
	l.push(controllertest.Revalidate(t, &m))
	a := l.reported("node-a", 2, "")
	b := l.reported("node-b", 3, "")
	t.Logf("push to applied on both nodes: %v", time.Since(start))
	if a.Report.Running["sensor"] != "2.0.0" || b.Report.Running["sensor"] != "2.0.0" {
		t.Fatalf("expected both running sensor 2.0.0, got %v and %v", a.Report.Running, b.Report.Running)
	}
	decls, err := l.St.Declared(controllertest.Ctx(t))
	if err != nil || len(decls) != 2 || decls[0].Revision != 2 || decls[1].Revision != 3 {
		t.Fatalf("declared: %+v (%v)", decls, err)
	}
	nodes, err := status.NodesStatus(controllertest.Ctx(t), l.St, time.Now())
	if err != nil || len(nodes) != 2 || !nodes[0].RolledOut() || !nodes[1].RolledOut() || nodes[0].Running["sensor"] != "2.0.0" {
		t.Fatalf("expected both nodes rolled out, got %+v (%v)", nodes, err)
	}
	// Heard, as the controller writes it every few seconds; not quiet.
	controllertest.Eventually(t, 3*store.LivenessEvery, "both nodes heard", func() bool {
		nodes, err := status.NodesStatus(controllertest.Ctx(t), l.St, time.Now())
		return err == nil && !nodes[0].Heard.IsZero() && !nodes[1].Heard.IsZero() && !nodes[0].Quiet && !nodes[1].Quiet
	})
}

// TestAPushThatFailsValidationChangesNothing: refused whole, naming the
// entry, before anything is sent.
func TestAPushThatFailsValidationChangesNothing(t *testing.T) {
	l := newLiving(t)
	before, _ := l.St.Declared(controllertest.Ctx(t))
	bad := strings.Replace(mustYAML(t, l.M), "name: sensor", "name: Sensor!", 1)
	if _, err := rollout.SendPush(controllertest.Ctx(t), l.St, []byte(bad)); !errors.Is(err, meshdesc.ErrInvalid) {
		t.Fatalf("expected the description refused, got %v", err)
	}
	// Sent past the check (by hand, as the controller): terminated, and
	// nothing changed.
	nc := controllertest.DialEventually(t, l.Credential(wire.ControllerUser))
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(controllertest.Ctx(t), wire.SubjectPush, []byte(`{"mesh":"`+strings.ReplaceAll(bad, "\n", `\n`)+`"}`)); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 10*time.Second, "the push terminated", func() bool { return l.loop.Counts().Terminated == 1 })
	after, _ := l.St.Declared(controllertest.Ctx(t))
	if len(after) != len(before) || after[0].Revision != before[0].Revision {
		t.Fatalf("a refused push changed the declarations: %+v → %+v", before, after)
	}
	if _, err := l.St.Description(controllertest.Ctx(t)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused push was stored: %v", err)
	}
}

// TestAReplayedOlderDeclarationIsRefused: an older declaration, genuine
// and signed, published again by hand with the controller's credential,
// is refused by the host (its revision is not after the one applied) and
// reported once; a declaration at a later sequence and revision is taken
// after it. (No guard here, which would put the newest back at once.)
func TestAReplayedOlderDeclarationIsRefused(t *testing.T) {
	l := newLivingGuarded(t, false)
	state := l.startHost("node-a")
	l.reported("node-a", 1, "")
	nc := controllertest.DialEventually(t, l.Credential(wire.ControllerUser))
	js, _ := jetstream.New(nc)
	nodes, err := js.Stream(controllertest.Ctx(t), wire.StreamNodes)
	if err != nil {
		t.Fatal(err)
	}
	first, err := nodes.GetLastMsgForSubject(controllertest.Ctx(t), wire.NodeDeclare("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := l.St.DeclarationKey(controllertest.Ctx(t))
	next := func(rev uint64) {
		d := rollout.Declarations(l.M)[0]
		d.Revision = rev
		if err := publishDeclarations(controllertest.Ctx(t), js, key, []wire.Declaration{d}); err != nil {
			t.Fatal(err)
		}
	}
	next(2)
	l.reported("node-a", 2, "")
	// The revision-1 declaration, published again: its body and signature.
	replay := &nats.Msg{Subject: first.Subject, Header: nats.Header{wire.HeaderSignature: first.Header.Values(wire.HeaderSignature)}, Data: first.Data}
	if _, err := js.PublishMsg(controllertest.Ctx(t), replay); err != nil {
		t.Fatal(err)
	}
	r := l.reported("node-a", 2, "revision 1")
	t.Logf("refused: %s", r.Report.Refused)
	if a, err := state.Applied(); err != nil || a.Declaration.Revision != 2 {
		t.Fatalf("the host applied %+v (%v), want revision 2 kept", a, err)
	}
	// Three reports so far: revisions 1 and 2, and the refusal. Polled
	// every 50 ms, a refusal said again would show before revision 3.
	controllertest.Eventually(t, 5*time.Second, "three reports taken", func() bool { return l.loop.Counts().Reported == 3 })
	next(3)
	l.reported("node-a", 3, "")
	controllertest.Eventually(t, 5*time.Second, "four reports taken", func() bool { return l.loop.Counts().Reported >= 4 })
	if got := l.loop.Counts().Reported; got != 4 {
		t.Errorf("expected four reports (1, 2, the refusal, 3), got %d: the refusal was said again", got)
	}
	// Published again with the headers the server gave it, its old
	// sequence among them: the answer then carries two, and is not read.
	if _, err := js.PublishMsg(controllertest.Ctx(t), &nats.Msg{Subject: first.Subject, Header: first.Header, Data: first.Data}); err != nil {
		t.Fatal(err)
	}
	l.reported("node-a", 3, "2 sequences")
}

func mustYAML(t *testing.T, m *meshdesc.Mesh) string {
	t.Helper()
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAPushAndAReportApplyOnceUnderRedelivery: the same push, or report,
// handed to the controller again (a redelivery, a controller killed
// between commit and ack) is recognised by its ledger entry and changes
// nothing more.
func TestAPushAndAReportApplyOnceUnderRedelivery(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	m := *b.M
	m.Modules = append([]meshdesc.Module(nil), b.M.Modules...)
	m.Modules[0].Version = "2.0.0"
	body := []byte(`{"mesh":` + strconvQuote(mustYAML(t, controllertest.Revalidate(t, &m))) + `}`)
	first, err := rollout.Push(ctx, b.St, b.Dir, store.LedgerKey(wire.SubjectPush, "p1", 3), body, b.Opts)
	if err != nil || first.Replayed || len(first.Changed) == 0 {
		t.Fatalf("first push: %+v (%v)", first, err)
	}
	again, err := rollout.Push(ctx, b.St, b.Dir, store.LedgerKey(wire.SubjectPush, "p1", 3), body, b.Opts)
	if err != nil || !again.Replayed {
		t.Fatalf("the same push again: %+v (%v)", again, err)
	}
	decls, _ := b.St.Declared(ctx)
	for _, d := range decls {
		if d.Revision != 1 {
			t.Errorf("%s at revision %d after one push applied twice, want 1", d.Node, d.Revision)
		}
	}
	// A report, from a node enrolled.
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, store.Node{Name: "node-a", SealingKey: "k", Enrolled: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	rep := wire.Report{Node: "node-a", ID: "r1", At: time.Now(), Applied: 1}
	if taken, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-a"), "r1", 10), 10, wire.NodeReport("node-a"), rep.Marshal(), "", b.Opts); err != nil || !taken {
		t.Fatalf("a report: %v %v", taken, err)
	}
	later := rep
	later.ID, later.Applied = "r2", 2
	if _, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-a"), "r2", 11), 11, wire.NodeReport("node-a"), later.Marshal(), "", b.Opts); err != nil {
		t.Fatal(err)
	}
	// r1 again, redelivered after r2 was kept: recognised, r2 stays.
	if taken, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-a"), "r1", 10), 10, wire.NodeReport("node-a"), rep.Marshal(), "", b.Opts); err != nil || taken {
		t.Fatalf("a report redelivered: taken %v (%v)", taken, err)
	}
	if reps, _ := b.St.Reports(ctx); len(reps) != 1 || reps[0].Report.ID != "r2" {
		t.Fatalf("reports: %+v", reps)
	}
	// From a node not enrolled: refused, nothing kept.
	stranger := wire.Report{Node: "node-b", ID: "x", At: time.Now(), Applied: 1}
	if _, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-b"), "x", 12), 12, wire.NodeReport("node-b"), stranger.Marshal(), "", b.Opts); !errors.Is(err, rollout.ErrBadControl) {
		t.Fatalf("a report from a node not enrolled: %v", err)
	}
	// On another node's subject: refused.
	if _, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-b"), "y", 13), 13, wire.NodeReport("node-b"), rep.Marshal(), "", b.Opts); !errors.Is(err, rollout.ErrBadControl) {
		t.Fatalf("node-a's report on node-b's subject: %v", err)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// programs is a directory whose default program stands in for every
// module: a process that stays up until it is told to stop.
func programs(t *testing.T) string {
	t.Helper()
	dir := testutil.OpenTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, host.DefaultProgram), []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportsWithoutPositionsAreOrderedByTheirTime: on AMQP, which keeps
// no positions (0), a node's last report is the one the host made last,
// and a report held and delivered again after a newer one does not
// replace it.
func TestReportsWithoutPositionsAreOrderedByTheirTime(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, store.Node{Name: "node-a", SealingKey: "k", Enrolled: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	older := wire.Report{Node: "node-a", ID: "r1", At: at, Applied: 1}
	newer := wire.Report{Node: "node-a", ID: "r2", At: at.Add(time.Second), Applied: 2}
	for _, r := range []wire.Report{older, newer} {
		if _, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-a"), r.ID, 0), 0, wire.NodeReport("node-a"), r.Marshal(), "", b.Opts); err != nil {
			t.Fatal(err)
		}
	}
	if reps, _ := b.St.Reports(ctx); len(reps) != 1 || reps[0].Report.ID != "r2" {
		t.Fatalf("expected r2, the newer, kept; got %+v", reps)
	}
	// The older again under another id (sent again after a lost confirm):
	// not taken over the newer.
	again := older
	again.ID = "r1-again"
	if taken, err := TakeReport(ctx, b.St, store.LedgerKey(wire.NodeReport("node-a"), again.ID, 0), 0, wire.NodeReport("node-a"), again.Marshal(), "", b.Opts); err != nil || taken {
		t.Fatalf("expected an older report not taken over a newer, got taken %v (%v)", taken, err)
	}
	if reps, _ := b.St.Reports(ctx); len(reps) != 1 || reps[0].Report.ID != "r2" {
		t.Fatalf("expected r2 still kept, got %+v", reps)
	}
}
