package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/amqplink"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestACutoverMovesEveryNodeToNATSAndRetiresTheMeshsSideOfTheBroker: a
// mesh on AMQP (a real RabbitMQ), two hosts enrolled and reporting on
// it, a NATS server raised beside the broker and adopted; a cutover begun
// goes through its phases under the running controller and ends done:
// every host keeps a credential for NATS and is heard there having
// applied its declaration to switch, the store says the mesh is on NATS,
// and the broker holds neither the mesh's virtual hosts nor its users,
// its administrator left. A second cutover is refused as completed.
func TestACutoverMovesEveryNodeToNATSAndRetiresTheMeshsSideOfTheBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("RabbitMQ container tests are skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := controllertest.RaiseOnAMQP(t, ctx, controllertest.SampleMesh(t))
	m, st, dir, o := a.M, a.St, a.Dir, a.O
	log := controllertest.Logger(t)
	o.Logger = log

	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, Logger: log, StartTimeout: 2 * time.Minute})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("the controller: %v", err)
		}
	})
	if _, err := rollout.Adopt(ctx, m, st, dir, o, rollout.AdoptOptions{Config: a.Config, Monitor: a.Monitor}); err != nil {
		t.Fatalf("adopt the server beside the broker: %v", err)
	}

	nodes := []string{"node-a", "node-b"}
	states := map[string]host.State{}
	for _, node := range nodes {
		_, doc, err := rollout.IssueToken(ctx, m, st, dir, node, time.Hour, o)
		if err != nil {
			t.Fatalf("issue a token for %s: %v", node, err)
		}
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		states[node] = host.State{Dir: filepath.Join(t.TempDir(), node)}
		hostCtx, stopHost := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- host.Run(hostCtx, host.Options{State: states[node], TokenFile: token, Heartbeat: time.Second, Poll: 200 * time.Millisecond, ReportEvery: 2 * time.Second, Logger: log.With("host", node)})
		}()
		t.Cleanup(func() {
			stopHost()
			if err := <-done; err != nil {
				t.Errorf("host %s: %v", node, err)
			}
		})
	}
	heardOn := func(bus string) func() bool {
		return func() bool {
			reports, err := st.Reports(ctx)
			if err != nil {
				return false
			}
			n := 0
			for _, r := range reports {
				if r.Bus == bus && r.Report.Applied > 0 {
					n++
				}
			}
			return n == len(nodes)
		}
	}
	controllertest.Eventually(t, 90*time.Second, "both hosts heard on AMQP having applied their declarations", heardOn(wire.BusAMQP))

	// Events the sensor emits on the broker, which nobody consumes before
	// the cutover (the hosts run stand-ins that consume nothing): what a
	// consumer that switches leaves in its queue.
	stranded := emitOnAMQP(ctx, t, st, "node-a", "sensor", "reading", 5)

	c, joined, err := rollout.BeginCutover(ctx, m, st, dir, o, rollout.CutoverOptions{Within: time.Minute})
	if err != nil || joined || c.Generation != 1 || c.Phase != store.CutoverCompose {
		t.Fatalf("expected cutover 1 begun in compose, got %+v joined %v: %v", c, joined, err)
	}
	if again, joined, err := rollout.BeginCutover(ctx, m, st, dir, o, rollout.CutoverOptions{}); err != nil || !joined || again.Generation != 1 {
		t.Fatalf("expected a second cutover begun meanwhile to join the first, got generation %d joined %v: %v", again.Generation, joined, err)
	}
	var phases []store.CutoverPhase
	controllertest.Eventually(t, 2*time.Minute, "the cutover done", func() bool {
		c, err = st.Cutover(ctx)
		if err == nil && (len(phases) == 0 || phases[len(phases)-1] != c.Phase) {
			phases = append(phases, c.Phase)
		}
		return err == nil && c.Phase.Ended()
	})
	if c.Phase != store.CutoverDone {
		t.Fatalf("expected the cutover done, it ended %s: %s (blocked: %s)", c.Phase, c.Stopped, c.Blocked)
	}
	t.Logf("phases seen: %v; begun %s, ended %s (%s)", phases, c.Begun.Format(time.RFC3339Nano), c.Ended.Format(time.RFC3339Nano), c.Ended.Sub(c.Begun))
	if bus, err := rollout.MeshBus(ctx, st); err != nil || bus != rollout.NATS {
		t.Fatalf("expected the mesh on NATS after the cutover, got %q: %v", bus, err)
	}
	for _, node := range nodes {
		cred, err := states[node].Credential()
		if err != nil || wire.BusOfScheme(cred.Scheme()) != wire.BusNATS {
			t.Fatalf("expected %s's host keeping a credential for NATS, got scheme %q: %v", node, cred.Scheme(), err)
		}
		n := c.Nodes[node]
		if n.Prepared.IsZero() || n.Switched.IsZero() || n.Switch <= n.Prepare {
			t.Fatalf("expected %s prepared then switched, got %+v", node, n)
		}
	}
	controllertest.Eventually(t, 30*time.Second, "both hosts heard on NATS", heardOn(wire.BusNATS))

	// Nothing stranded: the logger's consumer on NATS holds every event
	// left in its queue on the broker, once, as the sensor published them.
	if c.Moved.IsZero() {
		t.Fatal("expected the record to say the events left on the broker were moved")
	}
	pendingOnNATS(ctx, t, st, "node-b", "logger", stranded)

	secrets, err := st.Secrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vhosts []struct{ Name string }
	managementGet(t, m, secrets[wire.AMQPAdminUser].Password, "/api/vhosts", &vhosts)
	for _, v := range vhosts {
		if v.Name == wire.AMQPVhost || v.Name == wire.AMQPControlVhost {
			t.Errorf("expected the mesh's virtual host %s removed from the broker, it is there", v.Name)
		}
	}
	var users []struct{ Name string }
	managementGet(t, m, secrets[wire.AMQPAdminUser].Password, "/api/users", &users)
	for _, u := range users {
		if _, ours := secrets[u.Name]; ours && u.Name != wire.AMQPAdminUser {
			t.Errorf("expected the mesh's user %s removed from the broker, it is there", u.Name)
		}
	}
	if !slices.ContainsFunc(users, func(u struct{ Name string }) bool { return u.Name == wire.AMQPAdminUser }) {
		t.Errorf("expected the administrator %s kept (it observes the compatibility broker), it is gone", wire.AMQPAdminUser)
	}
	if _, _, err := rollout.BeginCutover(ctx, m, st, dir, o, rollout.CutoverOptions{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("completed")) {
		t.Fatalf("expected a cutover after one completed refused as completed, got %v", err)
	}
}

// managementGet reads path of the broker's management API as the
// controller's administrator into v.
func managementGet(t *testing.T, m *meshdesc.Mesh, password, path string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rollout.AMQPEndpoint(m)+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(wire.AMQPAdminUser, password)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// emitOnAMQP publishes n events keyed key as module on node, on the
// broker, through the AMQP binding, as the module would; it returns their
// ids.
func emitOnAMQP(ctx context.Context, t *testing.T, st store.Store, node, module, key string, n int) []string {
	t.Helper()
	doc, err := st.Credential(ctx, wire.ModuleUser(node, module))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := amqplink.Dial(ctx, link.Config{Credential: cred, Logger: controllertest.Logger(t), Timeout: 10 * time.Second, Context: ctx})
	if err != nil {
		t.Fatalf("dial the broker as %s: %v", cred.User(), err)
	}
	defer tr.Close()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("evt-stranded-%d", i)
		h := map[string][]string{wire.HeaderEventID: {id}, wire.HeaderNode: {node}, wire.HeaderSource: {module}, wire.HeaderContentType: {"application/json"}}
		if err := tr.Publish(ctx, key, link.Message{Header: h, Body: fmt.Appendf(nil, `{"seq":%d}`, i)}); err != nil {
			t.Fatalf("publish %s on the broker: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// pendingOnNATS: the consumer of module on node on NATS's EVENTS holds
// exactly the events ids, in order, none twice.
func pendingOnNATS(ctx context.Context, t *testing.T, st store.Store, node, module string, ids []string) {
	t.Helper()
	doc, err := st.Credential(ctx, wire.ModuleUser(node, module))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := link.Dial(ctx, cred)
	if err != nil {
		t.Fatalf("dial NATS as %s: %v", cred.User(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, wire.StreamEvents, wire.ModuleConsumer(node, module))
	if err != nil {
		t.Fatalf("the consumer of %s on EVENTS: %v", cred.User(), err)
	}
	batch, err := cons.Fetch(len(ids)+1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for msg := range batch.Messages() {
		got = append(got, msg.Headers().Get(wire.HeaderEventID))
		_ = msg.Ack()
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("expected %s's consumer on NATS to hold the events left on the broker, %v, once each, got %v", cred.User(), ids, got)
	}
}

// TestWhatIsSaidOnTheOldBusWhileTheMeshSwitchesIsFolded: a provider not
// moved yet says its status on the broker, and an event its consumer gave
// up on there is dead-lettered there, while the cutover waits for a node
// to switch; with the controller running, and with it stopped and started
// again. Each is in the store before the broker's mesh side is retired:
// the status says what the provider said last, and every dead letter is
// recorded, naming its event.
func TestWhatIsSaidOnTheOldBusWhileTheMeshSwitchesIsFolded(t *testing.T) {
	if testing.Short() {
		t.Skip("RabbitMQ container tests are skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := controllertest.SampleMesh(t)
	for i := range m.Modules {
		if m.Modules[i].Name == "sensor" {
			m.Modules[i].Provides = []string{"store"} // a provider: it may say its status
		}
	}
	a := controllertest.RaiseOnAMQP(t, ctx, controllertest.Revalidate(t, m))
	m, st, dir, o := a.M, a.St, a.Dir, a.O
	log := controllertest.Logger(t)
	o.Logger = log
	startController := func() (stop func()) {
		runCtx, end := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() {
			ran <- controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, Logger: log, StartTimeout: 2 * time.Minute})
		}()
		return func() {
			end()
			if err := <-ran; err != nil {
				t.Errorf("the controller: %v", err)
			}
		}
	}
	stopController := startController()
	defer func() { stopController() }()
	if _, err := rollout.Adopt(ctx, m, st, dir, o, rollout.AdoptOptions{Config: a.Config, Monitor: a.Monitor}); err != nil {
		t.Fatalf("adopt the server beside the broker: %v", err)
	}

	// No host runs: the test reports for the nodes as their hosts would,
	// and holds node-b on the broker after the switch.
	c, _, err := rollout.BeginCutover(ctx, m, st, dir, o, rollout.CutoverOptions{Within: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, time.Minute, "the cutover in prepare", func() bool {
		c, err = st.Cutover(ctx)
		return err == nil && c.Phase == store.CutoverPrepare && c.Nodes["node-a"].Prepare > 0 && c.Nodes["node-b"].Prepare > 0
	})
	for _, node := range []string{"node-a", "node-b"} {
		reportAs(ctx, t, st, node, wire.BusAMQP, c.Nodes[node].Prepare)
	}
	controllertest.Eventually(t, time.Minute, "the cutover switching", func() bool {
		c, err = st.Cutover(ctx)
		return err == nil && c.Phase == store.CutoverSwitch && c.Nodes["node-a"].Switch > 0
	})
	reportAs(ctx, t, st, "node-a", wire.BusNATS, c.Nodes["node-a"].Switch)

	sensor := oldCredential(ctx, t, m, st, wire.ModuleUser("node-a", "sensor"))
	logger := oldCredential(ctx, t, m, st, wire.ModuleUser("node-b", "logger"))
	ref := wire.ConsumerRef{Consumer: "logger", Node: "node-b"}
	failing, _ := json.Marshal(wire.FailingEvent{ConsumerRef: ref, Class: wire.ClassUnreachable, Since: time.Now().UTC()})
	publishOnAMQP(ctx, t, sensor, "node-a", "sensor", wire.EventProvisionerFailing, "evt-failing-on-amqp", failing)
	publishOnAMQP(ctx, t, sensor, "node-a", "sensor", "reading", "evt-dead-1", []byte(`{"seq":1}`))
	giveUpOn(ctx, t, logger, "node-b", "logger")
	controllertest.Eventually(t, time.Minute, "the failing word and the dead letter said on the broker in the store, the cutover still switching", func() bool {
		s, err := st.Status(ctx)
		return err == nil && len(s.Failing) == 1 && deadRecorded(ctx, st, "evt-dead-1")
	})
	if c, err = st.Cutover(ctx); err != nil || c.Phase != store.CutoverSwitch {
		t.Fatalf("expected the cutover still switching, got %s: %v", c.Phase, err)
	}

	// The controller stopped: what is said on the broker meanwhile waits
	// in its queues there, and is folded once it is started again, before
	// the broker's mesh side is retired.
	stopController()
	recovered, _ := json.Marshal(wire.RecoveredEvent{ConsumerRef: ref, Reason: wire.RecoveredSuccess})
	publishOnAMQP(ctx, t, sensor, "node-a", "sensor", wire.EventProvisionerRecovered, "evt-recovered-on-amqp", recovered)
	publishOnAMQP(ctx, t, sensor, "node-a", "sensor", "reading", "evt-dead-2", []byte(`{"seq":2}`))
	giveUpOn(ctx, t, logger, "node-b", "logger")
	reportAs(ctx, t, st, "node-b", wire.BusNATS, c.Nodes["node-b"].Switch)
	stopController = startController()
	controllertest.Eventually(t, 2*time.Minute, "the cutover done", func() bool {
		c, err = st.Cutover(ctx)
		return err == nil && c.Phase.Ended()
	})
	if c.Phase != store.CutoverDone {
		t.Fatalf("expected the cutover done, it ended %s: %s", c.Phase, c.Stopped)
	}
	s, err := st.Status(ctx)
	if err != nil || len(s.Failing) != 0 {
		t.Fatalf("expected the recovered word said on the broker while the controller was stopped folded, nothing failing, got %v: %v", failingKeys(s), err)
	}
	for _, id := range []string{"evt-dead-1", "evt-dead-2"} {
		if !deadRecorded(ctx, st, id) {
			t.Errorf("expected the dead letter of %s recorded", id)
		}
	}
}

// reportAs reports for node on bus, as its host does once it applied the
// declaration at revision.
func reportAs(ctx context.Context, t *testing.T, st store.Store, node, bus string, revision uint64) {
	t.Helper()
	now := time.Now().UTC()
	r := store.Reported{Report: wire.Report{Node: node, ID: fmt.Sprintf("%s-%d-%s", node, revision, bus), At: now, Applied: revision}, Received: now, Bus: bus}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutReport(ctx, r) }); err != nil {
		t.Fatal(err)
	}
}

// oldCredential is user's credential for the bus the cutover in progress
// moves from.
func oldCredential(ctx context.Context, t *testing.T, m *meshdesc.Mesh, st store.Store, user string) wire.Credential {
	t.Helper()
	c, err := st.Cutover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := rollout.OldCredential(ctx, m, st, c, user)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// publishOnAMQP publishes one event keyed key as module on node, with
// cred, through the AMQP binding, as the module would.
func publishOnAMQP(ctx context.Context, t *testing.T, cred wire.Credential, node, module, key, id string, body []byte) {
	t.Helper()
	tr, err := amqplink.Dial(ctx, link.Config{Credential: cred, Logger: controllertest.Logger(t), Timeout: 10 * time.Second, Context: ctx})
	if err != nil {
		t.Fatalf("dial the broker as %s: %v", cred.User(), err)
	}
	defer tr.Close()
	h := map[string][]string{wire.HeaderEventID: {id}, wire.HeaderNode: {node}, wire.HeaderSource: {module},
		wire.HeaderTime: {wire.FormatTime(time.Now())}, wire.HeaderContentType: {wire.ContentTypeJSON}}
	if err := tr.Publish(ctx, key, link.Message{Header: h, Body: body}); err != nil {
		t.Fatalf("publish %s on the broker: %v", id, err)
	}
}

// giveUpOn gives back every event in module's queue on node until the
// broker dead-letters it, as a consumer failing each time would.
func giveUpOn(ctx context.Context, t *testing.T, cred wire.Credential, node, module string) {
	t.Helper()
	conn, err := amqpconn.Dial(ctx, cred, amqpconn.Options{Name: cred.User() + " (gives up)"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(time.Now().Add(5*time.Second), nil)
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for given := 0; ; given++ {
		d, ok, err := ch.Get(wire.EventsQueue(node, module), false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if given == 0 {
				t.Fatalf("expected an event in %s's queue to give up on", cred.User())
			}
			return
		}
		if err := d.Nack(false, true); err != nil {
			t.Fatal(err)
		}
	}
}

// deadRecorded says whether the store holds a dead letter of event id.
func deadRecorded(ctx context.Context, st store.Store, id string) bool {
	held, err := st.DeadLetters(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(held, func(d store.DeadLetter) bool { return d.EventID == id })
}

// failingKeys names each failing provision of s with its class.
func failingKeys(s store.Status) []string {
	var out []string
	for _, f := range s.Failing {
		out = append(out, f.Provider+"/"+f.Node+"/"+f.Consumer+":"+f.Class)
	}
	return out
}
