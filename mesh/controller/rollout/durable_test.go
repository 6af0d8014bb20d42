package rollout_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
)

// syncLog records the directories fsynced, and what was in each when it
// was.
type syncLog struct {
	dirs    []string
	entries map[string][][]string
}

func (s *syncLog) sync(dir string) error {
	s.dirs = append(s.dirs, dir)
	var names []string
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		names = append(names, e.Name())
	}
	if s.entries == nil {
		s.entries = map[string][][]string{}
	}
	s.entries[dir] = append(s.entries[dir], names)
	return atomicfile.SyncDir(dir)
}

// TestGenesisMakesItsRenamesDurable: every directory genesis fills is
// synced before it is moved into place; the state directory once the
// server's nats/ is in, once more with everything but secrets.json (so it
// cannot outlive the rest after a crash), and once after.
func TestGenesisMakesItsRenamesDurable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	var log syncLog
	st := store.FileStoreSyncedBy(dir, log.sync)
	if _, err := rollout.Genesis(controllertest.Ctx(t), controllertest.SampleMesh(t), st, dir, rollout.WithSyncDir(rollout.Options{BcryptCost: bcrypt.MinCost}, log.sync)); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(log.dirs, root) {
		t.Errorf("the parent of the new state directory was not synced: %v", log.dirs)
	}
	for _, sub := range []string{statedir.TLSDir, statedir.NATSDir, statedir.CredentialsDir} {
		if !slices.ContainsFunc(log.dirs, func(d string) bool { return filepath.Base(d) == sub && filepath.Dir(filepath.Dir(d)) == dir }) {
			t.Errorf("%s was not synced before it was moved into place: %v", sub, log.dirs)
		}
	}
	seen := log.entries[dir]
	has := func(i int, names ...string) bool {
		for _, n := range names {
			if !slices.Contains(seen[i], n) {
				return false
			}
		}
		return true
	}
	if len(seen) != 3 || !has(0, statedir.NATSDir) || slices.Contains(seen[0], statedir.TLSDir) || slices.Contains(seen[0], statedir.CredentialsDir) ||
		!has(1, statedir.NATSDir, statedir.TLSDir, statedir.CredentialsDir) || slices.Contains(seen[1], statedir.SecretsFile) || slices.Contains(seen[0], statedir.SecretsFile) ||
		!has(2, statedir.SecretsFile) {
		t.Fatalf("expected the state directory synced with nats/, then with everything but secrets.json, then with it; got %v", seen)
	}
}
