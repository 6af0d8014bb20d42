package harness

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/internal/testutil"
)

// TestPooledMembersAreRecycledUnlessDisturbed raises a mesh on AMQP
// twice with one pool: the second cluster takes the first one's broker
// and store, recycled, and its controller comes up on them with the
// second genesis's certificate and users and the second store's password;
// the store holds nothing the first cluster left in it. A broker a step
// paused (and unpaused) and a store a step stopped and started are not
// handed on but removed.
func TestPooledMembersAreRecycledUnlessDisturbed(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := findRoot("")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewPool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pool.Close(context.Background()); err != nil {
			t.Errorf("close the pool: %v", err)
		}
	}()
	top := topology.Topology{Bus: topology.BusAMQP, Members: []topology.Member{
		{Name: "store", Kind: topology.KindPostgres, Networks: []string{Private}},
		{Name: "amqp", Kind: topology.KindRabbitMQ, Networks: []string{Private}},
		{Name: "controller", Kind: topology.KindController, Networks: []string{Private}},
	}}
	raise := func() (*Session, *Cluster, *Handle, *Handle) {
		t.Helper()
		s, err := NewSession(ctx, SessionOptions{Root: root, Out: testWriter{t}, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		c, err := s.RaiseGenesis(ctx, GenesisOptions{MeshFile: filepath.Join(root, "features", "testdata", "mesh.yaml"), Topology: top})
		if err != nil {
			dir := t.TempDir()
			_ = s.SaveLogs(ctx, dir)
			dumpLogs(t, dir)
			t.Fatal(err)
		}
		broker, err := c.Handle(RoleAMQP)
		if err != nil {
			t.Fatal(err)
		}
		store, err := c.Handle(RoleStore)
		if err != nil {
			t.Fatal(err)
		}
		return s, c, broker, store
	}
	idleWithin := func(role string, want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for pool.idleCount(role) != want {
			if time.Now().After(deadline) {
				t.Fatalf("expected %d %s(s) idle in the pool, got %d", want, role, pool.idleCount(role))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	s1, c1, first, firstStore := raise()
	if _, err := c1.QueryStore(ctx, "CREATE TABLE left_behind (v text); INSERT INTO left_behind VALUES ('the first cluster''s')"); err != nil {
		t.Fatal(err)
	}
	firstURL := c1.storeURL
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	idleWithin(RoleAMQP, 1)
	idleWithin(RoleStore, 1)
	s2, c2, second, secondStore := raise()
	if second.ID() != first.ID() || secondStore.ID() != firstStore.ID() {
		t.Fatalf("expected the second cluster to take the first one's broker %s and store %s, got %s and %s",
			first.ID(), firstStore.ID(), second.ID(), secondStore.ID())
	}
	for _, role := range Pooled {
		if started, recycled := pool.Counts(role); started != 1 || recycled != 1 {
			t.Errorf("expected 1 %s started and 1 raise given it recycled, got %d and %d", role, started, recycled)
		}
	}
	// The store's database is the second cluster's alone: the controller
	// made its tables in it again, the first cluster's table is gone, and
	// its password is not the first one's.
	rows, err := c2.QueryStore(ctx, "SELECT to_regclass('left_behind') IS NULL, count(*) > 0 FROM pg_tables WHERE schemaname = 'public'")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != "t" || rows[0][1] != "t" {
		t.Errorf("expected the first cluster's table gone and the controller's tables made anew, got %v", rows)
	}
	if c2.storeURL == firstURL {
		t.Errorf("expected the second cluster's store its own password, got the first one's URL")
	}
	logs, err := second.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs, "Server startup complete"); n != 1 {
		t.Errorf("expected the second cluster's logs of the broker to start at its lease (one start), got %d starts", n)
	}

	// Paused and unpaused, the broker runs as before; stopped and started,
	// the store too (its logs since the lease then say it is ready once).
	// Neither is handed on.
	if err := second.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := secondStore.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := secondStore.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, role := range Pooled {
		if n := pool.idleCount(role); n != 0 {
			t.Errorf("expected a %s a step disturbed not handed on, %d idle", role, n)
		}
	}
	for _, h := range []*Handle{second, secondStore} {
		if _, err := cli.ContainerInspect(ctx, h.ID(), client.ContainerInspectOptions{}); err == nil {
			t.Errorf("expected the %s %s a step disturbed removed", h.role, h.ID())
		}
	}
}
