package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// rollout is the state of a scenario that pushes (design 25 §10 step 4:
// upgrades, the newest declaration, the store away, dead letters).
type rollout struct {
	// pushed is when the last push was sent; declared the revisions
	// status showed before it, by node.
	pushed   time.Time
	declared map[string]uint64
	// kept is a declaration NODES (node.<node>) held, kept to be
	// published again.
	kept *observe.SignedDeclaration
	// reports is how many reports CONTROL held of a node when noted.
	reports map[string]uint64
	// held is the controller's delivered count on CONTROL when noted; on
	// AMQP, heldMark is where the control plane's firehose stood.
	held     uint64
	heldMark int
	// emitted is the event a consumer is made to fail.
	emitted observe.Acked
	// claimed is what a claim made in the background came to.
	claimed chan claimResult
	claimAt time.Time
	// mesh is the description the scenario last pushed; nil until then.
	mesh *meshdesc.Mesh
}

// mesh is the description the mesh runs in this scenario: the one last
// pushed, else the one it was raised from.
func (s *scenario) mesh() *meshdesc.Mesh {
	if s.ro.mesh != nil {
		return s.ro.mesh
	}
	return s.r.mesh
}

type claimResult struct {
	cred wire.Credential
	err  error
}

func (s *scenario) bindRollout(sc *godog.ScenarioContext) {
	sc.Step(`^a push gives every module the version "([^"]+)"$`, s.aPushGivesEveryModuleTheVersion)
	sc.Step(`^a push adds these modules to "([^"]+)":$`, s.aPushAddsModules)
	sc.Step(`^within (\d+) seconds every node runs every module declared to it, as status shows$`, s.everyNodeRunsItsModules)
	sc.Step(`^a push gives every module the version "([^"]+)", sent while the controller is paused$`, s.aPushWhileThePaused)
	sc.Step(`^I note the revisions status shows declared$`, s.iNoteTheRevisions)
	sc.Step(`^within (\d+) seconds every node runs every module at "([^"]+)", at the revision declared to it, as status shows$`, s.everyNodeRuns)
	sc.Step(`^every node was declared its next revision, once$`, s.everyNodeOneRevisionMore)
	sc.Step(`^I keep the declaration NODES holds for "([^"]+)"$`, s.iKeepTheDeclaration)
	sc.Step(`^NODES holds one declaration for "([^"]+)", the one status shows declared$`, s.nodesHoldsTheNewest)
	sc.Step(`^the kept declaration is published again with the controller's credential$`, s.theKeptIsPublishedAgain)
	sc.Step(`^within (\d+) seconds CONTROL holds a report of "([^"]+)" more$`, s.controlHoldsAReportMore)
	sc.Step(`^within (\d+) seconds status shows "([^"]+)" refused the kept declaration by its revision, and runs the one declared$`, s.statusShowsTheRefusal)
	sc.Step(`^within (\d+) seconds the controller has been handed the push (\d+) times more, and CONTROL still holds it$`, func(ctx context.Context, secs, times int) error {
		return s.heldOn(ctx, secs, times, wire.SubjectPush)
	})
	sc.Step(`^within (\d+) seconds the controller has been handed the enrolment request (\d+) times more, and CONTROL still holds it$`, func(ctx context.Context, secs, times int) error {
		return s.heldOn(ctx, secs, times, wire.SubjectEnrol)
	})
	sc.Step(`^that token is claimed, its answer awaited on its inbox$`, s.thatTokenIsClaimed)
	sc.Step(`^I note how often the controller has been handed CONTROL's messages$`, s.iNoteTheHanded)
	sc.Step(`^the host of each node runs each module declared to it as a process and a user of its own$`, s.eachModuleIsAProcess)
	sc.Step(`^within (\d+) seconds the claim is answered on its inbox with the credential of "([^"]+)"$`, s.theClaimIsAnswered)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" fails every delivery of "([^".]+)\.([^"]+)" until its deliveries run out$`, s.aConsumerFailsEveryDelivery)
	sc.Step(`^within (\d+) seconds status names the dead letter of "([^"]+)" on "([^"]+)" for that event$`, s.statusNamesTheDeadLetter)
	sc.Step(`^within (\d+) seconds CONTROL holds at least (\d+) reports of "([^"]+)" made while it was cut off$`, s.reportsMadeWhileCutOff)
}

// fullStatus is `mesh-controller status --json` whole, asked as a person
// with the state would, in a container of its own.
type fullStatus struct {
	store.Status
	Nodes    []status.NodeStatus `json:"nodes"`
	Dead     []store.DeadLetter  `json:"dead_letters"`
	Refusals store.Refusals      `json:"refusals"`
	// The build path: the builds asked and their outcomes, and what each
	// node did with the artifacts declared to it.
	Builds        []store.Build         `json:"builds"`
	Installations []status.Installation `json:"installations"`
	// Seats are the seats held by servers adopted in place.
	Seats []struct {
		Name     string    `json:"name"`
		Module   string    `json:"module"`
		Server   string    `json:"server"`
		ServerID string    `json:"server_id"`
		Config   string    `json:"config"`
		Adopted  time.Time `json:"adopted"`
	} `json:"seats"`
	// Compat is the compatibility broker's retirement condition.
	Compat *struct {
		Module    string         `json:"module"`
		Checked   time.Time      `json:"checked"`
		Connected map[string]int `json:"connected"`
		Retirable bool           `json:"retirable"`
	} `json:"compat"`
	// Cutover is the last cutover's record, nil before one.
	Cutover *store.Cutover `json:"cutover"`
}

func (s *scenario) fullStatus(ctx context.Context) (fullStatus, error) {
	r, err := s.cluster()
	if err != nil {
		return fullStatus{}, err
	}
	out, err := r.cluster.Status(ctx)
	if err != nil {
		return fullStatus{}, err
	}
	// The summary is the one line that is not a log line.
	for _, line := range strings.Split(string(out), "\n") {
		var st fullStatus
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &st) == nil && st.Failing != nil {
			return st, nil
		}
	}
	return fullStatus{}, fmt.Errorf("mesh-controller status printed no status:\n%s", out)
}

// push sends the scenario's description with every module at version,
// as an operator would: mesh-controller push, in a container of its own.
func (s *scenario) push(ctx context.Context, version string) error {
	if _, err := s.cluster(); err != nil {
		return err
	}
	m := *s.mesh()
	m.Modules = append([]meshdesc.Module(nil), m.Modules...)
	for i := range m.Modules {
		m.Modules[i].Version = version
	}
	return s.pushMesh(ctx, &m, "pushed-"+version+".yaml")
}

// pushMesh sends m as a push, staged under name, and makes it the
// scenario's description.
func (s *scenario) pushMesh(ctx context.Context, m *meshdesc.Mesh, name string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	r.tainted = true
	data, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mesh-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return err
	}
	if err := r.cluster.StageFile(filepath.Join(dir, name), name); err != nil {
		return err
	}
	s.ro.pushed = time.Now()
	if err := r.cluster.Push(ctx, name); err != nil {
		return err
	}
	s.ro.mesh = m
	return nil
}

// aPushAddsModules pushes the scenario's description with the modules
// the manifests (YAML, a list of modules) declare, assigned to node.
func (s *scenario) aPushAddsModules(ctx context.Context, node string, manifests *godog.DocString) error {
	if _, err := s.cluster(); err != nil {
		return err
	}
	var added []meshdesc.Module
	if err := yaml.Unmarshal([]byte(manifests.Content), &added); err != nil {
		return fmt.Errorf("the manifests added: %w", err)
	}
	m := *s.mesh()
	m.Modules = append(append([]meshdesc.Module(nil), m.Modules...), added...)
	m.Nodes = append([]meshdesc.Node(nil), m.Nodes...)
	i := slices.IndexFunc(m.Nodes, func(n meshdesc.Node) bool { return n.Name == node })
	if i < 0 {
		return fmt.Errorf("no node %q in the description", node)
	}
	m.Nodes[i].Modules = slices.Clone(m.Nodes[i].Modules)
	for _, mod := range added {
		m.Nodes[i].Modules = append(m.Nodes[i].Modules, mod.Name)
	}
	data, err := yaml.Marshal(&m)
	if err != nil {
		return err
	}
	checked, err := meshdesc.Parse(data)
	if err != nil {
		return fmt.Errorf("the description with the modules added: %w", err)
	}
	return s.pushMesh(ctx, checked, "pushed-modules.yaml")
}

// everyNodeRunsItsModules: status shows every node at its declared
// revision, running every module the scenario's description assigns it.
func (s *scenario) everyNodeRunsItsModules(ctx context.Context, seconds int) error {
	err := eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		for _, pl := range s.mesh().Placements() {
			n, ok := nodeStatus(st, pl.Node)
			if _, running := n.Running[pl.Module.Name]; !ok || !n.RolledOut() || !running {
				return fmt.Errorf("expected %s running %s at its declared revision; status shows %+v", pl.Node, pl.Module.Name, n)
			}
		}
		return nil
	})
	if err == nil && !s.ro.pushed.IsZero() {
		beds.Measure(ctx, "push to applied on every node", time.Since(s.ro.pushed))
	}
	return err
}

func (s *scenario) aPushGivesEveryModuleTheVersion(ctx context.Context, version string) error {
	return s.push(ctx, version)
}

// aPushWhileThePaused: the push reaches CONTROL, which the controller,
// paused, has not taken yet; the delivered count is noted. On AMQP the
// broker hands the push to the paused controller's prefetch as soon as it
// comes: the firehose is marked before it is sent, so that the handing is
// counted.
func (s *scenario) aPushWhileThePaused(ctx context.Context, version string) error {
	if s.onAMQP() {
		if err := s.noteHandedOnAMQP(ctx); err != nil {
			return err
		}
		return s.push(ctx, version)
	}
	if err := s.push(ctx, version); err != nil {
		return err
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return err
	}
	p, err := observe.ProgressOn(ctx, js, wire.StreamControl, wire.ControlConsumer)
	if err != nil {
		return err
	}
	s.ro.held = p.Delivered
	return nil
}

// iNoteTheHanded notes the controller's delivered count on CONTROL, and
// so holds the connection it is read through: it is needed while the
// store, which the controller's credential is asked of, is away. On AMQP
// it marks the control plane's firehose, watched from here on (the
// observer's credential is not the store's).
func (s *scenario) iNoteTheHanded(ctx context.Context) error {
	if s.onAMQP() {
		return s.noteHandedOnAMQP(ctx)
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return err
	}
	p, err := observe.ProgressOn(ctx, js, wire.StreamControl, wire.ControlConsumer)
	if err != nil {
		return err
	}
	s.ro.held = p.Delivered
	return nil
}

func (s *scenario) iNoteTheRevisions(ctx context.Context) error {
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	s.ro.declared = map[string]uint64{}
	for _, n := range st.Nodes {
		s.ro.declared[n.Node] = n.Declared
	}
	if len(s.ro.declared) == 0 {
		return fmt.Errorf("expected status to show the nodes' declarations, it shows none")
	}
	return nil
}

func (s *scenario) everyNodeRuns(ctx context.Context, seconds int, version string) error {
	err := eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		for _, pl := range s.mesh().Placements() {
			n, ok := nodeStatus(st, pl.Node)
			if !ok || !n.RolledOut() || n.Running[pl.Module.Name] != version {
				return fmt.Errorf("expected %s running %s at %s, at its declared revision; status shows %+v", pl.Node, pl.Module.Name, version, n)
			}
		}
		return nil
	})
	if err == nil && !s.ro.pushed.IsZero() {
		beds.Measure(ctx, "push to applied on every node", time.Since(s.ro.pushed))
	}
	if err == nil && s.storeBack.After(s.ro.pushed) {
		beds.Measure(ctx, "store healthy again to the push applied on every node", time.Since(s.storeBack))
	}
	return err
}

func (s *scenario) everyNodeOneRevisionMore(ctx context.Context) error {
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	for node, was := range s.ro.declared {
		n, _ := nodeStatus(st, node)
		if n.Declared != was+1 {
			return fmt.Errorf("expected %s declared revision %d (one push, once), status shows %d", node, was+1, n.Declared)
		}
	}
	return nil
}

func nodeStatus(st fullStatus, node string) (status.NodeStatus, bool) {
	for _, n := range st.Nodes {
		if n.Node == node {
			return n, true
		}
	}
	return status.NodeStatus{}, false
}

func (s *scenario) nodesStream(ctx context.Context) (jetstream.Stream, error) {
	js, err := s.streamJetStream(ctx, wire.StreamNodes)
	if err != nil {
		return nil, err
	}
	return js.Stream(ctx, wire.StreamNodes)
}

func (s *scenario) iKeepTheDeclaration(ctx context.Context, node string) error {
	d, err := s.newestDeclaration(ctx, node)
	if err != nil {
		return fmt.Errorf("read the declaration of %s: %w", node, err)
	}
	s.ro.kept = &d
	return nil
}

// newestDeclaration is what the mesh's bus holds as node's declaration:
// NODES's last message on its subject, or what node.<node> holds.
func (s *scenario) newestDeclaration(ctx context.Context, node string) (observe.SignedDeclaration, error) {
	if s.onAMQP() {
		return s.newestOnAMQP(ctx, node)
	}
	st, err := s.nodesStream(ctx)
	if err != nil {
		return observe.SignedDeclaration{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.NodeDeclare(node))
	if err != nil {
		return observe.SignedDeclaration{}, err
	}
	return observe.SignedDeclaration{Subject: m.Subject, Body: m.Data, Signature: m.Header.Get(wire.HeaderSignature)}, nil
}

// nodesHoldsTheNewest: NODES keeps one message per node, and for this one
// it is the revision status shows declared: a node that was away can be
// given nothing older.
func (s *scenario) nodesHoldsTheNewest(ctx context.Context, node string) error {
	if s.onAMQP() {
		// The controller puts every declaration again on its own clock
		// (run --declare-every), not when one older is put in its place:
		// after the kept one was published again, the newest is back
		// within that.
		return eventually(ctx, declarationPutAgainWithin, func(ctx context.Context) error { return s.nodeQueueHoldsTheNewest(ctx, node) })
	}
	st, err := s.nodesStream(ctx)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(wire.NodeDeclare(node)))
	if err != nil {
		return err
	}
	if n := info.State.Subjects[wire.NodeDeclare(node)]; n != 1 {
		return fmt.Errorf("expected NODES to hold one declaration for %s, it holds %d", node, n)
	}
	d, err := s.newestDeclaration(ctx, node)
	if err != nil {
		return err
	}
	return s.isTheDeclared(ctx, node, d)
}

// declarationPutAgainWithin bounds the controller's putting every
// declaration again on AMQP: the living bed runs it with
// --declare-every=5s (beds/living.go; 30 s in production), with room for
// a reading under way and a loaded machine.
const declarationPutAgainWithin = 20 * time.Second

// nodeQueueHoldsTheNewest: node.<node> holds one message, as the broker
// counts it, and it is the revision status shows declared.
func (s *scenario) nodeQueueHoldsTheNewest(ctx context.Context, node string) error {
	qs, err := s.controlQueues(ctx)
	if err != nil {
		return err
	}
	if q := qs[wire.NodeQueue(node)]; q.Messages != 1 {
		return fmt.Errorf("expected %s to hold one declaration for %s, it holds %d", wire.NodeQueue(node), node, q.Messages)
	}
	d, err := s.newestOnAMQP(ctx, node)
	if err != nil {
		return err
	}
	return s.isTheDeclared(ctx, node, d)
}

// isTheDeclared: d is the revision status shows declared to node.
func (s *scenario) isTheDeclared(ctx context.Context, node string, d observe.SignedDeclaration) error {
	var decl wire.Declaration
	if err := json.Unmarshal(d.Body, &decl); err != nil {
		return err
	}
	full, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if n, _ := nodeStatus(full, node); d.Node() != node || decl.Revision != n.Declared {
		return fmt.Errorf("expected the bus to hold revision %d of %s, it holds revision %d on %s", n.Declared, node, decl.Revision, d.Subject)
	}
	return nil
}

func (s *scenario) theKeptIsPublishedAgain(ctx context.Context) error {
	if s.ro.kept == nil {
		return fmt.Errorf("no declaration was kept in this scenario")
	}
	s.r.tainted = true
	kept := *s.ro.kept
	if err := s.noteReports(ctx, kept.Node()); err != nil {
		return err
	}
	// Its body and its signature, as the controller made them.
	if s.onAMQP() {
		c, err := s.controllerOnAMQP(ctx)
		if err != nil {
			return err
		}
		return c.Declare(ctx, kept)
	}
	js, err := s.streamJetStream(ctx, wire.StreamNodes)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: kept.Subject, Header: nats.Header{wire.HeaderSignature: []string{kept.Signature}}, Data: kept.Body}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish the kept declaration again: %w", err)
	}
	return nil
}

func (s *scenario) reportsHeld(ctx context.Context, node string) (uint64, error) {
	if s.onAMQP() {
		held, err := s.heldOnAMQP(ctx, wire.NodeReport(node))
		return uint64(held.Messages), err
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return 0, err
	}
	st, err := observe.StoredOn(ctx, js, wire.NodeReport(node))
	if err != nil {
		return 0, err
	}
	return st.Count, nil
}

func (s *scenario) noteReports(ctx context.Context, node string) error {
	n, err := s.reportsHeld(ctx, node)
	if err != nil {
		return err
	}
	if s.ro.reports == nil {
		s.ro.reports = map[string]uint64{}
	}
	s.ro.reports[node] = n
	return nil
}

func (s *scenario) controlHoldsAReportMore(ctx context.Context, seconds int, node string) error {
	was := s.ro.reports[node]
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		n, err := s.reportsHeld(ctx, node)
		if err != nil {
			return err
		}
		if n <= was {
			return fmt.Errorf("expected CONTROL to hold a report of %s more than %d, it holds %d", node, was, n)
		}
		return nil
	})
}

func (s *scenario) statusShowsTheRefusal(ctx context.Context, seconds int, node string) error {
	if s.ro.kept == nil {
		return fmt.Errorf("no declaration was kept in this scenario")
	}
	var kept wire.Declaration
	if err := json.Unmarshal(s.ro.kept.Body, &kept); err != nil {
		return err
	}
	want := fmt.Sprintf("revision %d", kept.Revision)
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		n, _ := nodeStatus(st, node)
		if !strings.Contains(n.Refused, want) || !n.RolledOut() {
			return fmt.Errorf("expected %s to have refused %s and to run its declared revision, status shows %+v", node, want, n)
		}
		beds.Logf(ctx, "%s refused: %s", node, n.Refused)
		return nil
	})
}

// heldOn: the controller, its store away, naks the message on subject
// with a delay: it is handed it again and again, and CONTROL keeps it.
func (s *scenario) heldOn(ctx context.Context, seconds, times int, subject string) error {
	if s.onAMQP() {
		return s.heldOnAMQPFor(ctx, seconds, times, subject)
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		p, err := observe.ProgressOn(ctx, js, wire.StreamControl, wire.ControlConsumer)
		if err != nil {
			return err
		}
		held, err := observe.StoredOn(ctx, js, subject)
		if err != nil {
			return err
		}
		if p.Delivered < s.ro.held+uint64(times) || held.Count != 1 {
			return fmt.Errorf("expected the message on %s handed to the controller %d times more and still in CONTROL; handed %d times more, CONTROL holds %d on %s",
				subject, times, p.Delivered-s.ro.held, held.Count, subject)
		}
		beds.Logf(ctx, "the message on %s was handed to the controller %d times while the store was away", subject, p.Delivered-s.ro.held)
		return nil
	})
}

func (s *scenario) aConsumerFailsEveryDelivery(ctx context.Context, module, node, emitter, key string) error {
	s.r.tainted = true
	if s.onAMQP() {
		return s.failOnAMQP(ctx, module, node, emitter, key)
	}
	e, err := s.connectEmitter(ctx, emitter)
	if err != nil {
		return err
	}
	ejs, err := jetstream.New(e.Conn)
	if err != nil {
		return err
	}
	acked, err := observe.Emit(ctx, ejs, nodeOf(s.r.mesh, emitter), emitter, key, 1)
	if err != nil {
		return err
	}
	s.ro.emitted = acked[0]
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return err
	}
	cjs, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	n, err := observe.FailDeliveries(ctx, cjs, wire.StreamEvents, wire.ModuleConsumer(node, module), acked[0].Seq, 2*time.Second)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "%s failed %d deliveries of %s", module, n, acked[0].ID)
	return nil
}

func nodeOf(m *meshdesc.Mesh, module string) string {
	for _, pl := range m.Placements() {
		if pl.Module.Name == module {
			return pl.Node
		}
	}
	return ""
}

func (s *scenario) statusNamesTheDeadLetter(ctx context.Context, seconds int, module, node string) error {
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		for _, d := range st.Dead {
			if d.Module == module && d.Node == node && d.EventID == s.ro.emitted.ID && d.StreamSeq == s.ro.emitted.Seq {
				return nil
			}
		}
		return fmt.Errorf("expected status to name the dead letter of %s on %s for event %s, it names %+v", module, node, s.ro.emitted.ID, st.Dead)
	})
}

// reportsMadeWhileCutOff: the reports the host made while it could not
// reach the bus were kept in its outbox and sent once it could; CONTROL
// holds them (the controller is paused, so none is taken yet).
func (s *scenario) reportsMadeWhileCutOff(ctx context.Context, seconds, atLeast int, node string) error {
	if s.brokenFrom.IsZero() || s.brokenUntil.IsZero() {
		return fmt.Errorf("no member was cut off for a time in this scenario")
	}
	if s.onAMQP() {
		return s.reportsMadeWhileCutOffOnAMQP(ctx, seconds, atLeast, node)
	}
	js, err := s.streamJetStream(ctx, wire.StreamControl)
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		held, err := observe.HeldReports(ctx, js, node)
		if err != nil {
			return err
		}
		n := 0
		for _, r := range held {
			if !r.At.Before(s.brokenFrom) && !r.At.After(s.brokenUntil) {
				n++
			}
		}
		if n < atLeast {
			return fmt.Errorf("expected CONTROL to hold at least %d reports of %s made between %s and %s, it holds %d of %d",
				atLeast, node, s.brokenFrom.Format(time.RFC3339), s.brokenUntil.Format(time.RFC3339), n, len(held))
		}
		beds.Logf(ctx, "%d reports of %s made while it was cut off reached CONTROL", n, node)
		return nil
	})
}

// claimWait bounds a claim made in the background: the store away, and
// back, and the controller's delays.
const claimWait = 3 * time.Minute

// thatTokenIsClaimed claims the scenario's token as a node would, in the
// background: it waits on the token's inbox for the answer, however long
// the controller holds the request.
func (s *scenario) thatTokenIsClaimed(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if s.live.token.Name == "" {
		return fmt.Errorf("no token issued in this scenario")
	}
	r.tainted = true
	addr, err := s.busAddress(ctx, r)
	if err != nil {
		return err
	}
	s.ro.claimed = make(chan claimResult, 1)
	s.ro.claimAt = time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimWait)
	go func() {
		defer cancel()
		cred, err := observe.Claim(cctx, s.live.token, addr)
		s.ro.claimed <- claimResult{cred, err}
	}()
	return nil
}

func (s *scenario) theClaimIsAnswered(ctx context.Context, seconds int, user string) error {
	if s.ro.claimed == nil {
		return fmt.Errorf("no claim was made in this scenario")
	}
	select {
	case res := <-s.ro.claimed:
		if res.err != nil {
			return fmt.Errorf("expected the claim answered with %s's credential, got %w", user, res.err)
		}
		if res.cred.User() != user {
			return fmt.Errorf("expected the claim answered with %s's credential, got %s's", user, res.cred.User())
		}
		beds.Measure(ctx, "claim held while the store was away, to its answer", time.Since(s.ro.claimAt))
		return nil
	case <-time.After(time.Duration(seconds) * time.Second):
		return fmt.Errorf("expected the claim answered within %ds, it is still waiting", seconds)
	}
}

// eachModuleIsAProcess: in each host's container, a process per module
// placed on its node, a child of the host (ADR 0047), named for its
// module, running as a user and a group of its own: neither the host's
// nor root, nor any other module's.
func (s *scenario) eachModuleIsAProcess(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	return eventually(ctx, modulesRunningWithin, func(ctx context.Context) error {
		for _, n := range s.mesh().Nodes {
			m, err := r.cluster.Member(n.Name)
			if err != nil {
				return err
			}
			procs, err := m.Processes(ctx)
			if err != nil {
				return err
			}
			if err := modulesAsTheirOwn(procs, n.Modules); err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
		}
		return nil
	})
}

// modulesRunningWithin bounds a host's starting the modules declared to
// it, once it has its declaration: a step right after the cluster is
// raised (a host enrolled within a second) can come before a host of
// another node started its own (once in five runs of bedrun all, node-b's
// logger not yet a process).
const modulesRunningWithin = 30 * time.Second

// modulesAsTheirOwn checks that procs, a host container's processes,
// hold each of modules as a child of the host, each as a user and group
// of its own.
func modulesAsTheirOwn(procs []harness.Process, modules []string) error {
	hostPID := slices.IndexFunc(procs, func(p harness.Process) bool { return strings.Contains(p.Command, host.HostProgram) })
	if hostPID < 0 {
		return fmt.Errorf("expected the host's process, the container runs %+v", procs)
	}
	hostProc := procs[hostPID]
	users := map[int]string{hostProc.UID: "the host"}
	for _, mod := range modules {
		i := slices.IndexFunc(procs, func(p harness.Process) bool {
			return strings.HasPrefix(p.Command, host.ProcessName(mod)) && p.PPID == hostProc.PID
		})
		if i < 0 {
			return fmt.Errorf("expected the host (pid %d) to run %s as a process of its own; its container runs %+v", hostProc.PID, mod, procs)
		}
		p := procs[i]
		if p.UID <= 0 || p.GID != p.UID {
			return fmt.Errorf("expected %s to run as a user of its own with a group of its own, got uid %d gid %d", mod, p.UID, p.GID)
		}
		if who, ok := users[p.UID]; ok {
			return fmt.Errorf("expected %s to run as a user of its own, got uid %d, %s's too", mod, p.UID, who)
		}
		users[p.UID] = mod
	}
	return nil
}
