package buses_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestACredentialForOneBusAgainstTheOther: a host's AMQP credential whose
// address is a NATS server, and its NATS credential pointed at a listener
// that speaks AMQP's side of nothing, each fail at once with an error
// naming where it dialled — neither hangs (a call on a broker that never
// answers is bounded: docs/control-plane.md), and neither carries the
// password.
func TestACredentialForOneBusAgainstTheOther(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	nats := srv.Creds[wire.HostUser("node-a")]

	onNATS := nats
	onNATS.URL = wire.AMQPControlURL(nats.User(), nats.Password(), srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	h, err := buses.DialHost(ctx, onNATS)
	if err == nil {
		_ = h.Close()
		t.Fatal("expected an AMQP credential refused by a NATS server, got a connection")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("expected the failure at once, got it after %v", took)
	}
	t.Logf("an AMQP credential against NATS: %v", err)
	if !strings.Contains(err.Error(), srv.Addr()) || strings.Contains(err.Error(), nats.Password()) {
		t.Fatalf("expected an error naming %s and not the password, got %v", srv.Addr(), err)
	}

	// A listener that takes the connection and says nothing, as a broker
	// frozen right after the accept would.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, cred := range []wire.Credential{
		func() wire.Credential {
			c := nats
			c.URL = wire.BusURL(nats.User(), nats.Password(), silent.Addr().String())
			return c
		}(),
		func() wire.Credential {
			c := nats
			c.URL = wire.AMQPControlURL(nats.User(), nats.Password(), silent.Addr().String())
			return c
		}(),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		h, err := buses.DialHost(ctx, cred)
		cancel()
		if err == nil {
			_ = h.Close()
			t.Fatalf("%s: expected a silent listener refused, got a connection", cred.Scheme())
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("%s: expected the dial bounded by its context (2s), got %v", cred.Scheme(), took)
		}
	}
}
