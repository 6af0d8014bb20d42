package testutil

import (
	"os"
	"testing"
)

// RequireRoot skips a test that runs a host's modules: the host runs each
// as an OS identity of its own and refuses to run them otherwise, which
// takes root (CI runs go test as root).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipped: the host runs each module as an identity of its own, which takes root; this runs as uid %d", os.Geteuid())
	}
}

// OpenTempDir is a temporary directory other users may enter (0755), for
// what a host's modules reach as identities of their own: the programs,
// the host's state. t.TempDir's are closed to them (0700).
func OpenTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mesh-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
