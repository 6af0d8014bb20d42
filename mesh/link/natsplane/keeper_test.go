package natsplane_test

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

const replacedWarning = "declaration replaced by something the controller did not sign"

// TestTheKeeperWarnsOfAForeignDeclarationNotOfItsOwnOutdatedOne: a Set
// replaces the controller's own declarations without saying anything was
// tampered with (it said so of every node at each switch of a cutover);
// a declaration the controller did not sign is still named, and put back.
func TestTheKeeperWarnsOfAForeignDeclarationNotOfItsOwnOutdatedOne(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logged testutil.SyncBuffer
	ctl, err := natsplane.DialController(ctx, srv.Creds[wire.ControllerUser], srv.Creds[wire.ControllerMeshUser],
		natsplane.ControllerOptions{Policy: natsplane.DefaultPolicy(), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	if _, err := ctl.Assert(ctx, m); err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(rev uint64) []plane.SignedDeclaration {
		body, sig, err := wire.SignDeclaration(key, wire.Declaration{Node: "node-a", Revision: rev})
		if err != nil {
			t.Fatal(err)
		}
		return []plane.SignedDeclaration{{Node: "node-a", Body: body, Signature: sig}}
	}
	k, err := ctl.Keep(ctx, sign(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	for rev := uint64(2); rev <= 4; rev++ {
		if err := k.Set(ctx, sign(rev)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logged.String(), replacedWarning) {
		t.Fatalf("expected the controller's own declarations replaced without a warning, got:\n%s", logged.String())
	}

	nc, err := srv.Dial(ctx, wire.ControllerUser)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(wire.NodeDeclare("node-a"), []byte(`{"node":"node-a","revision":99}`)); err != nil || nc.Flush() != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged.String(), replacedWarning); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("expected a declaration the controller did not sign named, got:\n%s", logged.String())
		}
	}
}
