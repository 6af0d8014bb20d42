package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// cutoverChildEnv makes this test binary, run again, one controller
// driving a cutover: StepCutover over and over, as the running controller
// does, until a test kills it with SIGKILL.
const cutoverChildEnv = "MESH_ROLLOUT_CUTOVER_CHILD"

type cutoverSpec struct{ Mesh, Dir string }

// loginBuses logs in for real and does nothing else: what a controller
// killed between a phase's commit and its buses' work leaves undone is
// redone by the guard and the next epoch, which this test does not hold.
type loginBuses struct{}

func (loginBuses) Login(ctx context.Context, doc []byte) error {
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return err
	}
	return buses.Login(ctx, cred)
}
func (loginBuses) AssertNew(context.Context, *meshdesc.Mesh, []byte, []byte) error { return nil }
func (loginBuses) Keep(context.Context, []wire.Declaration) error                  { return nil }
func (loginBuses) Reconnect()                                                      {}
func (loginBuses) MoveEvents(context.Context, *meshdesc.Mesh, store.Cutover) (int, error) {
	return 0, nil
}
func (loginBuses) DrainOld(context.Context) error                                 { return nil }
func (loginBuses) RetireOld(context.Context, *meshdesc.Mesh, store.Cutover) error { return nil }

func cutoverChild(raw string) int {
	var s cutoverSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m, err := meshdesc.Load(s.Mesh)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	st := store.FileStore(s.Dir)
	for {
		c, err := rollout.StepCutover(context.Background(), m, st, rollout.Options{}, loginBuses{})
		if err == nil && c.Phase.Ended() {
			return 0
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestACutoverKilledAnywhereEndsAsOneNeverKilled: the process driving a
// cutover is killed with SIGKILL at moments spread over its whole run,
// again and again, each time started again, while the nodes answer
// their declarations as hosts do. It ends as a run never killed ends:
// done, every node prepared then switched at the revisions declared to
// it, every credential on NATS, no declaration asking a move, and the
// store readable whole.
func TestACutoverKilledAnywhereEndsAsOneNeverKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the test binary again some forty times")
	}
	cb := newCutoverBed(t)
	ctx := controllertest.Ctx(t)
	desc, err := yaml.Marshal(cb.m)
	if err != nil {
		t.Fatal(err)
	}
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(meshFile, desc, 0o644); err != nil {
		t.Fatal(err)
	}
	cb.o.Now = nil // the child's clock is the real one; so is the record's
	if _, _, err := rollout.BeginCutover(ctx, cb.m, cb.st, cb.dir, cb.o, rollout.CutoverOptions{Within: time.Minute}); err != nil {
		t.Fatal(err)
	}
	stopNodes := answerAsHosts(t, cb.st)
	defer stopNodes()

	spec, _ := json.Marshal(cutoverSpec{Mesh: meshFile, Dir: cb.dir})
	var out bytes.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cutoverChildEnv+"="+string(spec))
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var phasesKilledIn []store.CutoverPhase
	// Killed after 10, 20, … 150 ms, again and again: in a process's
	// start and its first steps, logins included, and, as the hosts take
	// their time to answer, in every phase that waits for them. Every
	// fourth process is let run until the phase changes, and killed a
	// moment after: so the run gets on however slow the machine is (a
	// compose of logins can take longer than 150 ms under load), and
	// kills fall just after each phase's commit too.
	phaseNow := func() store.CutoverPhase {
		c, _ := cb.st.Cutover(ctx)
		return c.Phase
	}
	for i := range 60 {
		before := phaseNow()
		cmd := start()
		if i%4 == 3 {
			for deadline := time.Now().Add(30 * time.Second); phaseNow() == before && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(time.Duration(5*(i%7)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(10*(1+i%15)) * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		c, err := cb.st.Cutover(ctx)
		if err != nil {
			t.Fatalf("expected the record readable after a kill, got %v\n%s", err, out.String())
		}
		phasesKilledIn = append(phasesKilledIn, c.Phase)
		if c.Phase.Ended() {
			break
		}
	}
	last := start()
	done := make(chan error, 1)
	go func() { done <- last.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the last controller: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		_ = last.Process.Kill()
		<-done
		c, _ := cb.st.Cutover(ctx)
		t.Fatalf("expected the cutover to end within a minute of the last start, it is in %s (%s)", c.Phase, c.Blocked)
	}
	t.Logf("killed in phases %v", phasesKilledIn)
	for _, p := range []store.CutoverPhase{store.CutoverCompose, store.CutoverPrepare, store.CutoverSwitch} {
		if !slices.Contains(phasesKilledIn, p) {
			t.Errorf("expected a kill while the cutover was in %s, the kills came in %v", p, phasesKilledIn)
		}
	}

	c, err := cb.st.Cutover(ctx)
	if err != nil || c.Phase != store.CutoverDone {
		t.Fatalf("expected the cutover done, got %s (stopped %q): %v", c.Phase, c.Stopped, err)
	}
	for _, node := range []string{"node-a", "node-b"} {
		n := c.Nodes[node]
		if n.Prepared.IsZero() || n.Switched.IsZero() || n.Prepare == 0 || n.Switch <= n.Prepare {
			t.Fatalf("expected %s prepared then switched, got %+v", node, n)
		}
	}
	if bus, err := rollout.MeshBus(ctx, cb.st); err != nil || bus != rollout.NATS {
		t.Fatalf("expected the mesh on NATS, got %q: %v", bus, err)
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
		if cred, err := wire.ParseCredential(doc); err != nil || wire.BusOfScheme(cred.Scheme()) != wire.BusNATS {
			t.Fatalf("expected %s's credential on NATS, got %q: %v", u, cred.Scheme(), err)
		}
	}
	for node, d := range cb.declared(t) {
		if d.Move != nil {
			t.Fatalf("expected %s asked no move once done, got %+v", node, *d.Move)
		}
	}
}

// hostAnswersAfter is how long a node takes to answer a declaration, as
// a host polls and applies.
const hostAnswersAfter = 300 * time.Millisecond

// answerAsHosts reports for every node, as its host would once it applied
// the declaration it is given, hostAnswersAfter it first saw it: on AMQP
// until a declaration asks it to switch, on NATS from then on.
func answerAsHosts(t *testing.T, st store.Store) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		answered := map[string]uint64{}
		onNATS := map[string]bool{}
		seen := map[string]time.Time{} // by node and revision
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			decls, err := st.Declared(ctx)
			if err != nil {
				continue
			}
			for _, d := range decls {
				if answered[d.Node] >= d.Revision {
					continue
				}
				key := fmt.Sprintf("%s@%d", d.Node, d.Revision)
				if seen[key].IsZero() {
					seen[key] = time.Now()
				}
				if time.Since(seen[key]) < hostAnswersAfter {
					continue
				}
				if d.Move != nil && d.Move.Switch {
					onNATS[d.Node] = true
				}
				bus := wire.BusAMQP
				if onNATS[d.Node] {
					bus = wire.BusNATS
				}
				now := time.Now().UTC()
				r := store.Reported{Report: wire.Report{Node: d.Node, ID: fmt.Sprintf("%s-%d", d.Node, d.Revision), At: now, Applied: d.Revision}, Received: now, Bus: bus}
				if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutReport(ctx, r) }); err == nil {
					answered[d.Node] = d.Revision
				}
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
