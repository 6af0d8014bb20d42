package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The cutover (design 25 §9 step 5, docs/decisions/0013-cutover.md): the
// mesh of the adoption bed moves from the broker to the adopted server.
// Every check reads the controller's status, the adopted server's
// monitoring, the broker's management API or the predecessor's witness.

// cutoverWait is the --wait a step gives mesh-controller cutover: below
// the harness's own bound on the command.
const cutoverWait = 4 * time.Minute

// cutover is what the cutover steps keep: the last run of the command.
type cutover struct {
	out    string
	exit   int
	record store.Cutover
}

func (s *scenario) bindCutover(sc *godog.ScenarioContext) {
	sc.Step(`^a cutover is refused, saying "([^"]+)"$`, s.aCutoverIsRefused)
	sc.Step(`^a cutover again is refused, saying "([^"]+)"$`, s.aCutoverIsRefused)
	sc.Step(`^status shows no cutover$`, s.statusShowsNoCutover)
	sc.Step(`^within (\d+) seconds every node reports on "(amqp|nats)", as status shows$`, s.everyNodeReportsOn)
	sc.Step(`^the operator cuts the mesh over to NATS$`, func(ctx context.Context) error { return s.cutOver(ctx, 0) })
	sc.Step(`^the operator cuts the mesh over to NATS within (\d+) seconds$`, func(ctx context.Context, secs int) error {
		return s.cutOver(ctx, time.Duration(secs)*time.Second)
	})
	sc.Step(`^the cutover is done: every node proved it reaches NATS, then switched$`, s.theCutoverIsDone)
	sc.Step(`^every host and every module it runs is connected to the adopted server as its own user$`, s.everyPrincipalOnTheAdoptedServer)
	sc.Step(`^the broker holds nothing of the mesh: its virtual hosts, users and connections are the predecessor's and the administrators' alone$`, s.theBrokerHoldsNothingOfTheMesh)
	sc.Step(`^the cutover stopped, naming "([^"]+)" not heard, and the mesh stays on AMQP$`, s.theCutoverStopped)
	sc.Step(`^no principal of the mesh is connected to the adopted server$`, s.noMeshPrincipalConnectedNow)
	sc.Step(`^the operator begins the cutover to NATS within (\d+) seconds$`, s.theOperatorBeginsTheCutover)
	sc.Step(`^within (\d+) seconds status shows "([^"]+)" proved it reaches NATS, the cutover in prepare$`, s.statusShowsPrepared)
	sc.Step(`^within (\d+) seconds status shows the cutover switching, "([^"]+)" named not heard on NATS$`, s.statusShowsOverdue)
	sc.Step(`^the operator follows the cutover to its end$`, func(ctx context.Context) error { return s.cutOver(ctx, 0) })
	sc.Step(`^the adopted server is paused$`, func(ctx context.Context) error { return s.inject(ctx, harness.MemberBus, "pause") })
	sc.Step(`^the adopted server is resumed$`, s.theAdoptedServerIsResumed)
	sc.Step(`^within (\d+) seconds status shows the cutover held in compose, the mesh's principals not let in by the adopted server$`, s.statusShowsComposeHeld)
}

// theAdoptedServerIsResumed thaws the server beside the broker and waits
// for its monitoring to answer. Unlike the bus of a mesh on NATS, no
// client of the scenario's is on it to drop.
func (s *scenario) theAdoptedServerIsResumed(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if _, err := r.cluster.Undo(ctx, harness.MemberBus); err != nil {
		return err
	}
	return eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := s.readVarz(ctx)
		return err
	})
}

// statusShowsComposeHeld: the cutover is in compose, waiting because the
// principals' logins to the adopted server fail.
func (s *scenario) statusShowsComposeHeld(ctx context.Context, secs int) error {
	return s.cutoverAsStatusShows(ctx, secs, func(c store.Cutover) error {
		if c.Phase != store.CutoverCompose || !strings.Contains(c.Blocked, "cannot log in") {
			return fmt.Errorf("expected the cutover held in compose, the principals not let in; status shows phase %s, waiting %q", c.Phase, c.Blocked)
		}
		return nil
	})
}

// runCutover runs mesh-controller cutover with args.
func (s *scenario) runCutover(ctx context.Context, args ...string) (string, int, error) {
	r, err := s.cluster()
	if err != nil {
		return "", -1, err
	}
	nb, ok := r.cluster.(harness.NATSBesideRaiser)
	if !ok {
		return "", -1, fmt.Errorf("this cluster has no NATS server beside its broker to cut over to")
	}
	return nb.Cutover(ctx, args...)
}

func (s *scenario) aCutoverIsRefused(ctx context.Context, saying string) error {
	before, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	out, exit, err := s.runCutover(ctx, "--wait", "0")
	if err != nil {
		return err
	}
	if exit != 1 || !strings.Contains(out, saying) {
		return fmt.Errorf("expected mesh-controller cutover to exit 1 saying %q, it exited %d:\n%s", saying, exit, out)
	}
	after, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if a, b := fmt.Sprint(before.Cutover), fmt.Sprint(after.Cutover); a != b {
		return fmt.Errorf("expected a refused cutover to change no cutover's record, it was %s and is %s", a, b)
	}
	return nil
}

func (s *scenario) statusShowsNoCutover(ctx context.Context) error {
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if st.Cutover != nil {
		return fmt.Errorf("expected status to show no cutover, it shows cutover %d in phase %s", st.Cutover.Generation, st.Cutover.Phase)
	}
	return nil
}

// everyNodeReportsOn: every node of the description was last heard, by
// its report, on bus, running the revision declared to it.
func (s *scenario) everyNodeReportsOn(ctx context.Context, secs int, bus string) error {
	if _, err := s.cluster(); err != nil {
		return err
	}
	return eventually(ctx, time.Duration(secs)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		for _, n := range s.r.mesh.Nodes {
			i := slices.IndexFunc(st.Nodes, func(ns status.NodeStatus) bool { return ns.Node == n.Name })
			if i < 0 {
				return fmt.Errorf("expected status to show %s, it shows none", n.Name)
			}
			got := st.Nodes[i]
			if got.Bus != bus || !got.RolledOut() {
				return fmt.Errorf("expected %s last reporting on %s at the revision declared to it, status shows it on %q, declared %d, applied %d", n.Name, bus, got.Bus, got.Declared, got.Applied)
			}
		}
		return nil
	})
}

// cutOver runs the cutover to its end (within bounds prepare; 0 the
// command's default); the cluster's mesh is no longer the one raised.
func (s *scenario) cutOver(ctx context.Context, within time.Duration) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	r.tainted = true
	args := []string{"--wait", cutoverWait.String(), "--json"}
	if within > 0 {
		args = append(args, "--within", within.String())
	}
	start := time.Now()
	out, exit, err := s.runCutover(ctx, args...)
	if err != nil {
		return err
	}
	s.cut = cutover{out: out, exit: exit}
	rec, ok := cutoverRecord(out)
	if !ok {
		return fmt.Errorf("expected mesh-controller cutover to print its record, it exited %d:\n%s", exit, out)
	}
	s.cut.record = rec
	if rec.Phase == store.CutoverDone {
		beds.Measure(ctx, "cutover: begun → done, as its record says", rec.Ended.Sub(rec.Begun))
		beds.Measure(ctx, "cutover: command → exit", time.Since(start))
	}
	return nil
}

// cutoverRecord is the record the command printed as JSON (its logs are
// JSON lines too: the record is the line that reads as one).
func cutoverRecord(out string) (store.Cutover, bool) {
	for _, line := range strings.Split(out, "\n") {
		var c store.Cutover
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &c) == nil && c.Generation > 0 && c.Phase != "" {
			return c, true
		}
	}
	return store.Cutover{}, false
}

func (s *scenario) theCutoverIsDone(ctx context.Context) error {
	c := s.cut.record
	if s.cut.exit != 0 || c.Phase != store.CutoverDone {
		return fmt.Errorf("expected the cutover done and the command to exit 0, it exited %d in phase %s (stopped: %q, waiting: %q):\n%s", s.cut.exit, c.Phase, c.Stopped, c.Blocked, s.cut.out)
	}
	for _, n := range s.r.mesh.Nodes {
		got, ok := c.Nodes[n.Name]
		if !ok || got.Prepared.IsZero() || got.Switched.IsZero() || got.Switched.Before(got.Prepared) || got.Switch <= got.Prepare {
			return fmt.Errorf("expected %s to have proved it reaches NATS, then switched, the record says %+v", n.Name, got)
		}
	}
	st, err := s.fullStatus(ctx)
	if err != nil {
		return err
	}
	if st.Cutover == nil || st.Cutover.Generation != c.Generation || st.Cutover.Phase != store.CutoverDone {
		return fmt.Errorf("expected status to show cutover %d done, it shows %+v", c.Generation, st.Cutover)
	}
	return nil
}

// openUsers are the users connected to the adopted server now.
func (s *scenario) openUsers(ctx context.Context) ([]string, error) {
	body, err := s.monitor(ctx, observe.ConnzURL(s.r.mesh.Bus.Monitor, s.r.mesh.Bus.MonitorPort, "open"))
	if err != nil {
		return nil, err
	}
	return observe.ConnectedUsers(body)
}

func (s *scenario) everyPrincipalOnTheAdoptedServer(ctx context.Context) error {
	var want []string
	for _, n := range s.r.mesh.Nodes {
		want = append(want, wire.HostUser(n.Name))
		for _, m := range n.Modules {
			want = append(want, wire.ModuleUser(n.Name, m))
		}
	}
	return eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		users, err := s.openUsers(ctx)
		if err != nil {
			return err
		}
		var missing []string
		for _, u := range want {
			if !slices.Contains(users, u) {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("expected every host and module connected to the adopted server as its own user, missing %v; /connz shows %v", missing, users)
		}
		return nil
	})
}

func (s *scenario) noMeshPrincipalConnectedNow(ctx context.Context) error {
	return eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		users, err := s.openUsers(ctx)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(users, func(u string) bool { return u != harness.BesideUser }) {
			return fmt.Errorf("expected no principal of the mesh connected to the adopted server, /connz shows %v", users)
		}
		return nil
	})
}

// theBrokerHoldsNothingOfTheMesh reads the broker's management API: the
// virtual hosts are the default one and the predecessor's, the users the
// predecessor's, the controller's administrator (which watches the
// compatibility broker until it retires) and the harness's own, every
// connection the predecessor's or the harness's, every queue in a
// virtual host of the predecessor's or the harness's own.
func (s *scenario) theBrokerHoldsNothingOfTheMesh(ctx context.Context) error {
	w, err := s.witness(ctx)
	if err != nil {
		return err
	}
	var compatUsers, compatVhosts []string
	for _, m := range s.r.mesh.Modules {
		if m.Compat != nil {
			compatUsers = append(compatUsers, m.Compat.Users...)
			compatVhosts = append(compatVhosts, m.Compat.Vhosts...)
		}
	}
	api := w.Management
	var problems []string
	vhosts, err := api.ListVhosts()
	if err != nil {
		return fmt.Errorf("the broker's virtual hosts: %w", err)
	}
	for _, v := range vhosts {
		if v.Name != "/" && !slices.Contains(compatVhosts, v.Name) {
			problems = append(problems, "virtual host "+strconv.Quote(v.Name))
		}
	}
	users, err := api.ListUsers()
	if err != nil {
		return fmt.Errorf("the broker's users: %w", err)
	}
	notMesh := append([]string{wire.AMQPAdminUser}, w.HarnessUsers...)
	for _, u := range users {
		if !slices.Contains(compatUsers, u.Name) && !slices.Contains(notMesh, u.Name) {
			problems = append(problems, "user "+strconv.Quote(u.Name))
		}
	}
	conns, err := api.ListConnections()
	if err != nil {
		return fmt.Errorf("the broker's connections: %w", err)
	}
	for _, c := range conns {
		if !slices.Contains(compatUsers, c.User) && !slices.Contains(w.HarnessUsers, c.User) {
			problems = append(problems, fmt.Sprintf("connection %s of %s", c.Name, c.User))
		}
	}
	queues, err := api.ListQueues()
	if err != nil {
		return fmt.Errorf("the broker's queues: %w", err)
	}
	for _, q := range queues {
		if !slices.Contains(compatVhosts, q.Vhost) && !slices.Contains(w.HarnessQueues, observe.Queue{Vhost: q.Vhost, Name: q.Name}) {
			problems = append(problems, fmt.Sprintf("queue %s in %s", q.Name, q.Vhost))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("expected nothing of the mesh left on the broker, it holds: %s", strings.Join(problems, ", "))
	}
	return nil
}

func (s *scenario) theCutoverStopped(ctx context.Context, node string) error {
	c := s.cut.record
	if s.cut.exit != 1 || c.Phase != store.CutoverStopped || !strings.Contains(c.Stopped, "not heard") || !strings.Contains(c.Stopped, node) {
		return fmt.Errorf("expected the cutover stopped naming %s not heard, and the command to exit 1, it exited %d in phase %s (stopped: %q):\n%s", node, s.cut.exit, c.Phase, c.Stopped, s.cut.out)
	}
	for _, n := range s.r.mesh.Nodes {
		if n.Name != node && strings.Contains(c.Stopped, n.Name) {
			return fmt.Errorf("expected the cutover stopped naming %s alone, it says %q", node, c.Stopped)
		}
		cred, err := s.r.cluster.Credential(ctx, wire.HostUser(n.Name))
		if err != nil {
			return err
		}
		if bus := wire.BusOfScheme(cred.Scheme()); bus != wire.BusAMQP {
			return fmt.Errorf("expected %s's credential on the broker after the cutover stopped, it dials %s", wire.HostUser(n.Name), cred.Scheme())
		}
	}
	return nil
}

// theOperatorBeginsTheCutover records the cutover and returns at once
// (--wait 0): the running controller drives it.
func (s *scenario) theOperatorBeginsTheCutover(ctx context.Context, secs int) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	r.tainted = true
	out, exit, err := s.runCutover(ctx, "--within", (time.Duration(secs) * time.Second).String(), "--wait", "0")
	if err != nil {
		return err
	}
	if exit != 0 || !strings.Contains(out, " begun;") {
		return fmt.Errorf("expected the cutover begun and the command to exit 0, it exited %d:\n%s", exit, out)
	}
	return nil
}

// cutoverAsStatusShows waits until status shows the cutover as ok says.
func (s *scenario) cutoverAsStatusShows(ctx context.Context, secs int, ok func(c store.Cutover) error) error {
	return eventually(ctx, time.Duration(secs)*time.Second, func(ctx context.Context) error {
		st, err := s.fullStatus(ctx)
		if err != nil {
			return err
		}
		if st.Cutover == nil {
			return fmt.Errorf("expected status to show a cutover, it shows none")
		}
		return ok(*st.Cutover)
	})
}

func (s *scenario) statusShowsPrepared(ctx context.Context, secs int, node string) error {
	return s.cutoverAsStatusShows(ctx, secs, func(c store.Cutover) error {
		if c.Phase != store.CutoverPrepare || c.Nodes[node].Prepared.IsZero() {
			return fmt.Errorf("expected the cutover in prepare, %s proved it reaches NATS; status shows phase %s, %s %+v", node, c.Phase, node, c.Nodes[node])
		}
		return nil
	})
}

// statusShowsOverdue: the switch is committed, every node but node is
// switched, and node is named overdue.
func (s *scenario) statusShowsOverdue(ctx context.Context, secs int, node string) error {
	return s.cutoverAsStatusShows(ctx, secs, func(c store.Cutover) error {
		if c.Phase != store.CutoverSwitch || !strings.Contains(c.Blocked, "not heard on nats") || !strings.Contains(c.Blocked, node) {
			return fmt.Errorf("expected the cutover switching, %s named not heard on NATS; status shows phase %s, waiting %q", node, c.Phase, c.Blocked)
		}
		for name, n := range c.Nodes {
			if (name == node) != n.Switched.IsZero() {
				return fmt.Errorf("expected every node but %s switched, status shows %s %+v", node, name, n)
			}
		}
		return nil
	})
}
