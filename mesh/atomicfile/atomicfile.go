// Package atomicfile replaces files so that a reader sees the old content
// or the new one, never a torn file, and the new survives a crash: the
// controller's state directory, a host's credentials and outbox.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TempInfix marks Write's temporary files: "."+name+TempInfix+random. A
// process killed mid-write leaves one; whoever owns the directory removes
// them.
const TempInfix = ".tmp-"

// Write replaces path with data through a temporary file in the
// same directory and a rename, so that a reader (the nats container's
// watcher, a module reading its credential) sees the old content or the
// new one, never a torn file. It reports whether the content changed;
// unchanged content is not rewritten.
//
// The directory is fsynced after the rename, with sync (SyncDir, or what a
// test sees it through): until then the rename itself may not survive a
// crash, and the old content (a revoked user's configuration, a status
// already acknowledged) would come back.
func Write(path string, data []byte, perm fs.FileMode, sync func(dir string) error) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+TempInfix+"*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	// fsync before the rename: after a crash the new name must not point
	// at an empty file.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := sync(filepath.Dir(path)); err != nil {
		// The new content is in place but may not survive a crash: say
		// so, and let the caller write again.
		return true, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// SyncDir fsyncs a directory, so that the entries created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
