package observe

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// startMesh starts the real nats-server in-process with the configuration
// composed from features/testdata/<file>.
func startMesh(t *testing.T, file string) *natstest.Server {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return natstest.Start(t, m)
}

// dialAs connects as user, with its credential, and returns the client
// and its JetStream; the client is closed when the test ends.
func dialAs(ctx context.Context, t *testing.T, s *natstest.Server, user string) (*Client, jetstream.JetStream) {
	t.Helper()
	c, err := Dial(ctx, s.Creds[user], "")
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return c, js
}
