// Package scale measures the living mesh's cost as the fleet grows: N
// simulated hosts, each its own connection with its own credential,
// against an in-process nats-server on the composed configuration and the
// controller on a real PostgreSQL, enrolling and then applying one push.
//
//	go test -run X -bench Fleet -benchtime 1x ./mesh/controller/scale
//	MESH_FLEET_SIZES=50,200 go test -run X -bench Fleet -benchtime 1x ./mesh/controller/scale
//
// Each phase's time is reported per run (enrol-s, push-s) and per node.
package scale

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fleet is a description of n nodes, each running one module that emits.
func fleet(t testing.TB, n int) *meshdesc.Mesh {
	t.Helper()
	m := &meshdesc.Mesh{
		Name:    "fleet",
		Bus:     meshdesc.Bus{Names: []string{"localhost", "127.0.0.1"}, Port: testutil.FreePort(t), Monitor: "127.0.0.1"},
		Modules: []meshdesc.Module{{Name: "agent", Emits: []string{"beat"}, Version: "1.0.0"}},
	}
	for i := range n {
		m.Nodes = append(m.Nodes, meshdesc.Node{Name: fmt.Sprintf("node-%04d", i), Modules: []string{"agent"}})
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := meshdesc.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func BenchmarkFleet(b *testing.B) {
	sizes := sizesOf(b, "MESH_FLEET_SIZES", 50, 200, 500)
	for _, n := range sizes {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			var enrol, push time.Duration
			for range b.N {
				e, p := runFleet(b, n)
				enrol += e
				push += p
			}
			b.ReportMetric(enrol.Seconds()/float64(b.N), "enrol-s")
			b.ReportMetric(push.Seconds()/float64(b.N), "push-s")
			b.ReportMetric(enrol.Seconds()*1000/float64(b.N*n), "enrol-ms/node")
			b.ReportMetric(push.Seconds()*1000/float64(b.N*n), "push-ms/node")
		})
	}
}

// sizesOf are the fleet sizes the environment variable env lists,
// comma-separated, or def.
func sizesOf(b *testing.B, env string, def ...int) []int {
	list := os.Getenv(env)
	if list == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("%s: %v", env, err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// runFleet raises a mesh of n nodes and returns how long its hosts took
// to enrol (tokens issued → every host's first report taken) and to
// apply one push (sent → every node reporting the new version).
func runFleet(b *testing.B, n int) (enrol, push time.Duration) {
	b.StopTimer()
	m := fleet(b, n)
	root := b.TempDir()
	dir := filepath.Join(root, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	st, err := pgstore.Open(ctx, pgtest.Start(b).NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	o := genesisOptions(m, root, dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, o); err != nil {
		b.Fatal(err)
	}
	srv := natstest.ServeFile(b, statedir.Layout{Dir: dir}.NATSConfig())
	defer srv.Shutdown()
	stopWatch := natstest.ReloadOnChange(b, srv, statedir.Layout{Dir: dir}.NATSConfig(), 100*time.Millisecond, func(err error) { b.Errorf("reload: %v", err) })
	defer stopWatch()

	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, StartTimeout: time.Minute})
	}()
	defer func() {
		stopRun()
		if err := <-ran; err != nil {
			b.Errorf("controller: %v", err)
		}
	}()
	// The controller has declared every node once it is up.
	waitFor(b, time.Minute, nil, "the controller's declarations", func() bool {
		d, err := st.Declared(ctx)
		return err == nil && len(d) == n
	})

	b.StartTimer()
	start := time.Now()
	nodes := make([]string, n)
	for i, node := range m.Nodes {
		nodes[i] = node.Name
	}
	_, docs, err := rollout.IssueTokens(ctx, m, st, dir, nodes, time.Hour, o)
	if err != nil {
		b.Fatal(err)
	}
	hs := runHosts(b, ctx, root, nodes, docs)
	defer hs.stop()
	failed := hs.failed
	defer func() {
		if !b.Failed() {
			return
		}
		reported := map[string]bool{}
		if reps, err := st.Reports(context.WithoutCancel(ctx)); err == nil {
			for _, r := range reps {
				reported[r.Report.Node] = true
			}
		}
		for i, node := range nodes {
			if !reported[node] {
				b.Logf("host %s, which never reported:\n%s", node, hs.logs[i].String())
			}
		}
	}()
	// Bounded well above what a run takes (docs/living-mesh.md, "Scale").
	waitFor(b, time.Minute+time.Duration(n)*500*time.Millisecond, failed, "every host's first report", func() bool { return reportedAt(ctx, st, n, 1) })
	enrol = time.Since(start)

	pushed := *m
	pushed.Modules = []meshdesc.Module{m.Modules[0]}
	pushed.Modules[0].Version = "2.0.0"
	data, err := yaml.Marshal(&pushed)
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if _, err := rollout.SendPush(ctx, st, data); err != nil {
		b.Fatal(err)
	}
	waitFor(b, time.Minute+time.Duration(n)*100*time.Millisecond, failed, "every node reporting the push", func() bool { return reportedAt(ctx, st, n, 2) })
	push = time.Since(start)
	b.StopTimer()
	return enrol, push
}

// fleetHosts are the hosts of a run, one per node, in this process.
type fleetHosts struct {
	// failed receives a host's reason for giving up, so that a wait ends
	// at once rather than at its deadline.
	failed chan error
	// logs are each host's log, told for the hosts a wait gave up on.
	logs []testutil.SyncBuffer
	stop func()
}

// runHosts runs a host for each node with its token document, under root,
// until stop.
func runHosts(b *testing.B, ctx context.Context, root string, nodes []string, docs [][]byte) *fleetHosts {
	hostCtx, cancel := context.WithCancel(ctx)
	hs := &fleetHosts{failed: make(chan error, len(nodes)), logs: make([]testutil.SyncBuffer, len(nodes))}
	var wg sync.WaitGroup
	hs.stop = func() { cancel(); wg.Wait() }
	for i, doc := range docs {
		hdir := filepath.Join(root, "hosts", nodes[i])
		if err := os.MkdirAll(hdir, 0o700); err != nil {
			hs.stop()
			b.Fatal(err)
		}
		token := filepath.Join(hdir, "token.json")
		if err := os.WriteFile(token, doc, 0o600); err != nil {
			hs.stop()
			b.Fatal(err)
		}
		wg.Go(func() {
			err := host.Run(hostCtx, host.Options{State: host.State{Dir: filepath.Join(hdir, "state")}, TokenFile: token,
				Poll: 500 * time.Millisecond, ReportEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(&hs.logs[i], nil))})
			if err != nil && hostCtx.Err() == nil {
				hs.failed <- fmt.Errorf("host %s: %w", nodes[i], err)
			}
		})
	}
	return hs
}

// reportedAt says whether n nodes' last reports are of revision rev.
func reportedAt(ctx context.Context, st store.Store, n int, rev uint64) bool {
	reps, err := st.Reports(ctx)
	if err != nil {
		return false
	}
	got := 0
	for _, r := range reps {
		if r.Report.Applied == rev {
			got++
		}
	}
	return got == n
}

// waitFor polls cond until it holds, failing the run at d or at the
// first error from failed.
func waitFor(b *testing.B, d time.Duration, failed <-chan error, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("not within %v: %s", d, what)
		}
		select {
		case err := <-failed:
			b.Fatalf("waiting for %s: %v", what, err)
		case <-tick.C:
		}
	}
}

// genesisOptions are the controller's options for a genesis of m in dir
// (under root), its bus on loopback at m's port, bcrypt at its cheapest.
func genesisOptions(m *meshdesc.Mesh, root, dir string) rollout.Options {
	return rollout.Options{
		BcryptCost: bcrypt.MinCost,
		Server: compose.Inputs{
			ConfigDir: filepath.Join(dir, statedir.NATSDir),
			StoreDir:  filepath.Join(root, "js"),
			Listen:    net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Bus.Port)),
			Monitor:   "127.0.0.1:0",
		},
	}
}
