package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// adoptChildEnv makes this test binary, run again, one adopting process:
// what mesh-controller adopt does, which a test kills with SIGKILL.
const adoptChildEnv = "MESH_ROLLOUT_ADOPT_CHILD"

// adoptSpec is what the adopting process is given.
type adoptSpec struct {
	Mesh, Dir, Config, Monitor string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(adoptChildEnv); spec != "" {
		os.Exit(adoptChild(spec))
	}
	if spec := os.Getenv(cutoverChildEnv); spec != "" {
		os.Exit(cutoverChild(spec))
	}
	os.Exit(m.Run())
}

func adoptChild(raw string) int {
	var s adoptSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m, err := meshdesc.Load(s.Mesh)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = rollout.Adopt(context.Background(), m, store.FileStore(s.Dir), s.Dir, rollout.Options{BcryptCost: bcrypt.MinCost},
		rollout.AdoptOptions{Config: s.Config, Monitor: s.Monitor, LiveWithin: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestAnAdoptionKilledMidWayIsCompletedWhenRunAgain: the adopting process
// is killed with SIGKILL the moment the server's file begins to change
// (after the seat's commit, before the mesh's accounts are whole). What
// it leaves is the seat recorded and the accounts bare, never a file torn
// or the accounts whole without their seat; adopt run again completes it,
// the mesh's imports routed.
func TestAnAdoptionKilledMidWayIsCompletedWhenRunAgain(t *testing.T) {
	// The server's watcher looks every 500 ms: the adopting process waits
	// that long for the first reload, and is killed meanwhile.
	b := raiseBesideWatched(t, 500*time.Millisecond)
	raised, err := os.ReadFile(b.config)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := yaml.Marshal(b.m)
	if err != nil {
		t.Fatal(err)
	}
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(meshFile, desc, 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(adoptSpec{Mesh: meshFile, Dir: b.dir, Config: b.config, Monitor: b.monitor})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), adoptChildEnv+"="+string(spec))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cur, _ := os.ReadFile(b.config); !bytes.Equal(cur, raised) {
			killed = cmd.Process.Kill() == nil
			break
		}
	}
	waitErr := cmd.Wait()
	if !killed {
		t.Fatalf("the adopting process was not caught changing the file: %v\n%s", waitErr, out.String())
	}

	ctx := context.Background()
	seats, err := b.st.Seats(ctx)
	if err != nil || len(seats) != 1 {
		t.Fatalf("expected the seat recorded before anything was written, got %+v, %v", seats, err)
	}
	cur, _ := os.ReadFile(b.config)
	left, err := conf.Parse(string(cur))
	if err != nil {
		t.Fatalf("expected one whole configuration left, got %v:\n%s", err, cur)
	}
	accounts, _ := left["accounts"].(map[string]any)
	control, ok := accounts[wire.AccountControl].(map[string]any)
	if !ok || len(control) != 0 {
		t.Fatalf("expected the kill to leave the mesh's accounts bare, got %v", accounts[wire.AccountControl])
	}

	res, err := b.adopt(t, rollout.AdoptOptions{})
	if err != nil || !res.Resumed || res.ServerID != b.srv.ID() {
		t.Fatalf("expected adopt run again to complete the adoption of %s, got %+v, %v", b.srv.ID(), res, err)
	}
	b.heartbeatRoutes(t, b.dial(t, wire.ControllerUser, b.password(t, wire.ControllerUser)))
}
