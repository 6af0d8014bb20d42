package buses_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestTheBuildPathsProgramsPickTheirBusByScheme: the builder's and a
// repository's credentials connect on NATS by their tls:// scheme, and the
// same credentials naming amqps:// are dialled as AMQP — against the NATS
// server they fail at once, naming where they dialled and not carrying
// the password.
func TestTheBuildPathsProgramsPickTheirBusByScheme(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	dials := map[string]struct {
		cred wire.Credential
		dial func(context.Context, wire.Credential) (interface{ Close() error }, error)
	}{
		"builder": {srv.Creds[wire.BuilderUser], func(ctx context.Context, c wire.Credential) (interface{ Close() error }, error) {
			return buses.DialBuilder(ctx, c)
		}},
		"source": {srv.Creds[wire.SourceUser("modules")], func(ctx context.Context, c wire.Credential) (interface{ Close() error }, error) {
			return buses.DialSource(ctx, c)
		}},
	}
	for who, d := range dials {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := d.dial(ctx, d.cred)
		if err != nil {
			cancel()
			t.Fatalf("%s: expected its NATS credential connected, got %v", who, err)
		}
		_ = conn.Close()

		onNATS := d.cred
		onNATS.URL = wire.AMQPControlURL(d.cred.User(), d.cred.Password(), srv.Addr())
		start := time.Now()
		conn, err = d.dial(ctx, onNATS)
		cancel()
		if err == nil {
			_ = conn.Close()
			t.Fatalf("%s: expected an AMQP credential refused by a NATS server, got a connection", who)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%s: expected the failure at once, got it after %v", who, took)
		}
		if !strings.Contains(err.Error(), srv.Addr()) || strings.Contains(err.Error(), d.cred.Password()) {
			t.Fatalf("%s: expected an error naming %s and not the password, got %v", who, srv.Addr(), err)
		}
	}
}
