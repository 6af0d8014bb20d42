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

// TestABrokerIsRecycledUnlessDisturbed raises a mesh on AMQP twice with
// one pool of brokers: the second cluster takes the first one's broker,
// recycled, and its controller comes up on it with the second genesis's
// certificate and users; a broker a step paused (and unpaused) is not
// handed on but removed.
func TestABrokerIsRecycledUnlessDisturbed(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := findRoot("")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewBrokers(ctx)
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
	raise := func() (*Session, *Handle) {
		t.Helper()
		s, err := NewSession(ctx, SessionOptions{Root: root, Out: testWriter{t}, Brokers: pool})
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
		h, err := c.Handle(RoleAMQP)
		if err != nil {
			t.Fatal(err)
		}
		return s, h
	}
	idleWithin := func(want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for pool.idleCount() != want {
			if time.Now().After(deadline) {
				t.Fatalf("expected %d broker(s) idle in the pool, got %d", want, pool.idleCount())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	s1, first := raise()
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	idleWithin(1)
	s2, second := raise()
	if second.ID() != first.ID() {
		t.Fatalf("expected the second cluster to take the first one's broker %s, got %s", first.ID(), second.ID())
	}
	if booted, recycled := pool.Counts(); booted != 1 || recycled != 1 {
		t.Errorf("expected 1 broker booted and 1 raise given it recycled, got %d and %d", booted, recycled)
	}
	logs, err := second.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs, "Server startup complete"); n != 1 {
		t.Errorf("expected the second cluster's logs of the broker to start at its lease (one start), got %d starts", n)
	}

	// Paused and unpaused, it runs as before, and is still not handed on.
	if err := second.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pool.idleCount(); n != 0 {
		t.Errorf("expected a broker a step paused not handed on, %d idle", n)
	}
	if _, err := cli.ContainerInspect(ctx, second.ID(), client.ContainerInspectOptions{}); err == nil {
		t.Errorf("expected the broker %s a step paused removed", second.ID())
	}
}
