package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestRaiseGenesis raises the sample mesh end to end, dials the bus from
// this host with the controller's credential, checks the EVENTS stream,
// and checks Close leaves nothing of the run behind.
func TestRaiseGenesis(t *testing.T) {
	testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := findRoot("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(ctx, SessionOptions{Root: root, Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close(context.Background())
		}
	}()

	c, err := s.RaiseGenesis(ctx, GenesisOptions{MeshFile: filepath.Join(root, "features", "testdata", "mesh.yaml")})
	if err != nil {
		dir := t.TempDir()
		_ = s.SaveLogs(ctx, dir)
		dumpLogs(t, dir)
		t.Fatal(err)
	}
	// EVENTS is in the mesh account, reached as the controller's user there.
	cred, err := c.Credential(ctx, wire.ControllerMeshUser)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := c.BusAddress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := link.Dial(ctx, cred, link.WithAddress(addr), link.WithName("harness-test"))
	if err != nil {
		t.Fatalf("dial the bus at %s as %s: %v", addr, cred.User(), err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		t.Fatalf("expected stream %s, got %v", wire.StreamEvents, err)
	}
	if info := st.CachedInfo(); info.Config.Name != wire.StreamEvents {
		t.Fatalf("expected stream %s, got %q", wire.StreamEvents, info.Config.Name)
	}
	nc.Close()

	if _, err := c.Credential(ctx, "../secrets"); err == nil {
		t.Fatal("expected a path for a user name to be refused")
	}
	if r, err := c.Probe(ctx, Private, "http", "http://nats:8222/healthz"); err != nil || !r.OK {
		t.Fatalf("expected monitoring to answer on the private network, got %+v, %v", r, err)
	}

	// apply on an unchanged description, staged under another name: the
	// one-shot path a bed uses to change the mesh.
	if err := c.StageFile(c.MeshFile(), "same.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, "same.yaml"); err != nil {
		t.Fatalf("expected apply to succeed: %v", err)
	}
	if _, err := c.Handle(RoleController); err != nil {
		t.Fatal(err)
	}
	// The apply ran in the running controller's container, as a docker
	// exec: no container of its own. With the controller stopped, the next
	// one runs in a one-shot container, on the same binds and store.
	if hasRole(s, "controller-apply") {
		t.Errorf("expected apply run in the controller's container, got a container of its own")
	}
	if _, err := c.Inject(ctx, MemberController, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, "same.yaml"); err != nil {
		t.Fatalf("expected apply to succeed with the controller stopped: %v", err)
	}
	if !hasRole(s, "controller-apply-2") {
		t.Errorf("expected apply run in a container of its own with the controller stopped")
	}
	if err := c.UndoAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("expected status from the controller's container again: %v", err)
	}

	logDir := t.TempDir()
	if err := c.SaveLogs(ctx, logDir); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"genesis", RoleNATS, RoleController, "controller-apply", "controller-apply-2", "status", "probe"} {
		if _, err := os.Stat(filepath.Join(logDir, role+".log")); err != nil {
			t.Errorf("expected %s.log among the saved logs: %v", role, err)
		}
	}
	t.Log(c.Describe())

	closed = true
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cs, ns := leftovers(t, s.docker, s.ID()); cs+ns != 0 {
		t.Fatalf("expected nothing labelled mesh.run=%s after Close, got %d containers and %d networks", s.ID(), cs, ns)
	}
	if _, err := os.Stat(s.WorkDir()); !os.IsNotExist(err) {
		t.Fatalf("expected the temporary work dir removed, got %v", err)
	}
}

// hasRole says whether the session has created a container playing role.
func hasRole(s *Session, role string) bool {
	for _, h := range s.tracked() {
		if h.Role() == role {
			return true
		}
	}
	return false
}

// dumpLogs puts saved container logs into the test's output.
func dumpLogs(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		t.Logf("=== %s\n%s", e.Name(), strings.TrimSpace(tail(string(b), 40)))
	}
}

// TestRaiseGenesisRefusedIsNotInfrastructure: a description genesis
// refuses is the product's answer, reported with its output, and not an
// infrastructure failure; a container Docker cannot start is one.
func TestRaiseGenesisRefusedIsNotInfrastructure(t *testing.T) {
	testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := NewSession(ctx, SessionOptions{Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	desc := "name: bad\nbus:\n  names: [nats]\n  monitor: nats\nnodes:\n  - name: node-a\n    modules: [ghost]\n"
	if err := os.WriteFile(bad, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := s.RaiseGenesis(ctx, GenesisOptions{MeshFile: bad})
	if err == nil {
		t.Fatal("expected genesis to refuse a node assigned an unknown module")
	}
	if errors.Is(err, ErrInfrastructure) {
		t.Fatalf("expected a product failure, got an infrastructure one: %v", err)
	}
	if !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("expected the error to carry genesis's output naming the module, got %v", err)
	}

	_, _, err = s.runOnce(ctx, "broken", c.images.probe, 30*time.Second, testcontainers.WithEntrypoint("/no-such-program"))
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("expected a container that cannot start to be an infrastructure failure, got %v", err)
	}
}
