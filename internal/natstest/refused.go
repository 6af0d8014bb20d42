package natstest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// RefusedTokenFile starts the sample mesh's bus (features/testdata/
// mesh.yaml) and writes, in dir, its enrolment token tok-node-c with a
// password the bus refuses: what a token spent past its grace, expired or
// revoked is to a host. It returns the file's path.
func RefusedTokenFile(t testing.TB, dir string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := meshdesc.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	srv := Start(t, m)
	token := srv.Creds[wire.EnrolUser("tok-node-c")]
	token.URL = wire.BusURL(token.User(), "not-its-password", srv.Addr())
	path := filepath.Join(dir, "token.json")
	if err := os.WriteFile(path, token.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
