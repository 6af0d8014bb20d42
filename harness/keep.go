package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// keptMarker is the file that says a run was kept on purpose (bedrun
// --keep): its process is gone, but its containers are not leftovers, and
// reaping leaves them until a person removes them and the marker.
func keptMarker(run string) string {
	return filepath.Join(os.TempDir(), "mesh-"+run+".kept")
}

// Keep marks the run as kept: later sessions do not reap it. Describe's
// remove command removes the marker too.
func (s *Session) Keep() error {
	if err := os.WriteFile(keptMarker(s.id), []byte(s.work+"\n"), 0o644); err != nil {
		return fmt.Errorf("keep run %s: %w", s.id, err)
	}
	return nil
}

// kept reports whether run was kept on purpose.
func kept(run string) bool {
	_, err := os.Stat(keptMarker(run))
	return err == nil
}
