package controller

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/crypto/bcrypt"
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
	return syncDir(dir)
}

// TestWriteAtomicSyncsTheDirectoryAfterTheRename: the rename is made
// durable, and a failure to make it so is the caller's error.
func TestWriteAtomicSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	var at []string
	changed, err := writeAtomicSync(path, []byte("new"), 0o600, func(d string) error {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "new" {
			t.Errorf("directory synced before the rename: %q, %v", got, err)
		}
		at = append(at, d)
		return nil
	})
	if err != nil || !changed || !slices.Equal(at, []string{dir}) {
		t.Fatalf("expected one sync of %s after the rename, got %v (changed %v, %v)", dir, at, changed, err)
	}
	failed := errors.New("disk says no")
	if _, err := writeAtomicSync(path, []byte("newer"), 0o600, func(string) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("expected the failed directory sync to be reported, got %v", err)
	}
	// Unchanged content is neither rewritten nor synced.
	if changed, err := writeAtomicSync(path, []byte("newer"), 0o600, func(string) error { t.Error("synced with nothing written"); return nil }); changed || err != nil {
		t.Fatalf("unchanged content: changed %v, %v", changed, err)
	}
}

func TestSyncDir(t *testing.T) {
	if err := syncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("expected an error syncing a directory that does not exist")
	}
}

// TestGenesisMakesItsRenamesDurable: every directory genesis fills is
// synced before it is moved into place; the state directory once the
// server's nats/ is in, once more with everything but secrets.json (so it
// cannot outlive the rest after a crash), and once after.
func TestGenesisMakesItsRenamesDurable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	var log syncLog
	st := newFileStore(dir)
	st.sync = log.sync
	if _, err := Genesis(ctxT(t), sampleMesh(t), st, dir, Options{BcryptCost: bcrypt.MinCost, syncDir: log.sync}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(log.dirs, root) {
		t.Errorf("the parent of the new state directory was not synced: %v", log.dirs)
	}
	for _, sub := range []string{TLSDir, NATSDir, CredentialsDir} {
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
	if len(seen) != 3 || !has(0, NATSDir) || slices.Contains(seen[0], TLSDir) || slices.Contains(seen[0], CredentialsDir) ||
		!has(1, NATSDir, TLSDir, CredentialsDir) || slices.Contains(seen[1], SecretsFile) || slices.Contains(seen[0], SecretsFile) ||
		!has(2, SecretsFile) {
		t.Fatalf("expected the state directory synced with nats/, then with everything but secrets.json, then with it; got %v", seen)
	}
}
