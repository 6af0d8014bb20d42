package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/statedir"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestGenesisApplyAndStatusOnPostgres: with --store, genesis keeps the
// state in the database and only nats/ in the state directory; status
// reads it from there; a second genesis is refused; apply finds it.
func TestGenesisApplyAndStatusOnPostgres(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()

	if code, _, stderr := cli(t, ctx, "status", "--store", dsn); code != exitFailed || !strings.Contains(stderr, "no genesis") {
		t.Fatalf("status before genesis: expected exit 1 saying there is no genesis, got %d:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--store", dsn, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	l := statedir.Layout{Dir: state}
	if _, err := os.Stat(l.NATSConfig()); err != nil {
		t.Errorf("expected nats.conf in the state directory: %v", err)
	}
	if _, err := os.Stat(l.Secrets()); !os.IsNotExist(err) {
		t.Errorf("expected no secrets.json beside a PostgreSQL store, stat says %v", err)
	}
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if users, err := st.Credentials(ctx); err != nil || len(users) == 0 {
		t.Fatalf("expected the credentials in the database, got %v (%v)", users, err)
	}
	if code, stdout, stderr := cli(t, ctx, "status", "--store", dsn); code != exitOK || stdout != "no provision is failing\n" {
		t.Fatalf("status of a new mesh: got %d %q %s", code, stdout, stderr)
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--store", dsn); code != exitFailed || !strings.Contains(stderr, "already holds a genesis") {
		t.Fatalf("a second genesis: expected exit 1 refusing it, got %d:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, ctx, "apply", "--mesh", meshFile, "--state", state, "--store", dsn, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("apply: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"status", "--store", "mysql://x"},
		{"status", "--store", dsn, "--state", state},
		{"genesis", "--mesh", meshFile, "--state", state, "--store", "/var/lib/db"},
	} {
		if code, _, _ := cli(t, ctx, args...); code != exitUsage {
			t.Errorf("%q: expected exit %d, got %d", args, exitUsage, code)
		}
	}
}
