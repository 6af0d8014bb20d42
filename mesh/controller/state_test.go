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
// synced, and the state directory once before secrets.json is moved in
// (so it cannot outlive the rest after a crash) and once after.
func TestGenesisMakesItsRenamesDurable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	var log syncLog
	if _, err := Genesis(sampleMesh(t), dir, Options{BcryptCost: bcrypt.MinCost, syncDir: log.sync}); err != nil {
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
	if len(seen) != 2 || slices.Contains(seen[0], SecretsFile) || !slices.Contains(seen[0], CredentialsDir) || !slices.Contains(seen[1], SecretsFile) {
		t.Fatalf("expected the state directory synced with everything but secrets.json, then with it; got %v", seen)
	}
}
