package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteAtomicSyncsTheDirectoryAfterTheRename: the rename is made
// durable, and a failure to make it so is the caller's error.
func TestWriteAtomicSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	var at []string
	changed, err := Write(path, []byte("new"), 0o600, func(d string) error {
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
	if _, err := Write(path, []byte("newer"), 0o600, func(string) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("expected the failed directory sync to be reported, got %v", err)
	}
	// Unchanged content is neither rewritten nor synced.
	if changed, err := Write(path, []byte("newer"), 0o600, func(string) error { t.Error("synced with nothing written"); return nil }); changed || err != nil {
		t.Fatalf("unchanged content: changed %v, %v", changed, err)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("expected an error syncing a directory that does not exist")
	}
}
