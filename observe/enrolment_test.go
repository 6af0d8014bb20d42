package observe

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestConnzShowsAPrincipalConnectedOverTLSWhileItIs: the reading the
// living bed makes of a host connected as itself, against the real
// server's /connz.
func TestConnzShowsAPrincipalConnectedOverTLSWhileItIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startMesh(t, "mesh.yaml")
	mon := s.MonitorAddr()
	open := func(user string) []Connection {
		t.Helper()
		conns, err := Connections(get(t, ConnzURL(mon.IP.String(), mon.Port, "open")))
		if err != nil {
			t.Fatal(err)
		}
		return OpenOverTLS(conns, user)
	}
	if got := open(wire.HostUser("node-a")); len(got) != 0 {
		t.Fatalf("before any connection: %+v", got)
	}
	c, err := Dial(ctx, s.Creds[wire.HostUser("node-a")], "")
	if err != nil {
		t.Fatal(err)
	}
	got := open(wire.HostUser("node-a"))
	if len(got) != 1 || got[0].TLSVersion == "" || got[0].IP == "" {
		t.Fatalf("connected: expected one open TLS connection of host.node-a, got %+v", got)
	}
	if other := open(wire.HostUser("node-b")); len(other) != 0 {
		t.Fatalf("host.node-b never connected, got %+v", other)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(open(wire.HostUser("node-a"))) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("closed: host.node-a still listed open")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := Connections([]byte("not json")); err == nil {
		t.Error("a body that is not /connz's was read")
	}
}

// TestAClaimWithARevokedTokenIsRefusedByTheServer: a token whose user the
// server no longer has is refused at login, before any controller could
// see the claim; a live token's claim is not refused so (here no
// controller answers, so it is not sent).
func TestAClaimWithARevokedTokenIsRefusedByTheServer(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startMesh(t, "mesh.yaml")
	token := s.Creds[wire.EnrolUser("tok-node-c")]

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = Claim(ctx, token, "")
	cancel()
	if err == nil || RefusedLogin(err) || !errors.Is(err, host.ErrNotSent) {
		t.Fatalf("a live token with no controller: expected an unsent claim not refused at login, got %v", err)
	}

	revoked := *m
	revoked.Tokens = nil
	s.Apply(&revoked)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Claim(ctx, token, "")
	if !RefusedLogin(err) || !errors.Is(err, host.ErrNotSent) {
		t.Fatalf("a revoked token: expected the login refused by the server, got %v", err)
	}
	if RefusedLogin(nil) || RefusedLogin(errors.New("timeout")) {
		t.Error("RefusedLogin says yes to what is not a refused login")
	}
}

func TestEnrolledNodesReadsTheStoresRows(t *testing.T) {
	got, err := EnrolledNodes([][]string{{"node-a", "tok-1", "2026-01-01 00:00:00+00"}, {"node-b", "tok-2", "2026-01-01 00:00:01+00"}})
	if err != nil || len(got) != 2 || got["node-a"].Token != "tok-1" || got["node-b"].Enrolled != "2026-01-01 00:00:01+00" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := EnrolledNodes([][]string{{"node-a"}}); err == nil {
		t.Error("a row of one column was read")
	}
}

// TestNamedReadsTheNameAClientGave: /connz's name field, as a client set it.
func TestNamedReadsTheNameAClientGave(t *testing.T) {
	conns, err := Connections([]byte(`{"connections":[{"authorized_user":"mod.node-a.pry","name":"pry: tried"},{"authorized_user":"host.node-a","name":"pry","reason":"Client Closed"},{"authorized_user":"host.node-a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := Named(conns, "pry"); len(got) != 1 || got[0].User != "host.node-a" || got[0].Reason != "Client Closed" {
		t.Fatalf("named pry: %+v", got)
	}
	if got := Named(conns, "pry: tried"); len(got) != 1 || got[0].User != "mod.node-a.pry" {
		t.Fatalf("named pry: tried: %+v", got)
	}
}

// TestAMQPConnections reads what rabbitmqctl printed for a host's
// connection over TLS (RabbitMQ 3.10, amqp091-go, the connection named)
// and for a plain one.
func TestAMQPConnections(t *testing.T) {
	body := []byte(`[
{"user":"host.node-a","ssl_protocol":"tlsv1.3","peer_host":[0,0,0,0,0,65535,44049,1],"client_properties":[["platform","longstr","golang"],["connection_name","longstr","host node-a"],["product","longstr","AMQP 0.9.1 Client"]]},
{"user":"predecessor","ssl_protocol":"","peer_host":[10,0,0,7],"client_properties":[]}
]`)
	got, err := AMQPConnections(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []Connection{
		{User: "host.node-a", Name: "host node-a", TLSVersion: "1.3", IP: "[0 0 0 0 0 65535 44049 1]"},
		{User: "predecessor", IP: "[10 0 0 7]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("expected %+v, got %+v", want, got)
	}
	if tls := OpenOverTLS(got, "predecessor"); len(tls) != 0 {
		t.Fatalf("expected a plain connection not counted over TLS, got %+v", tls)
	}
	if _, err := AMQPConnections([]byte("Listing connections ...")); err == nil {
		t.Fatal("expected what is not JSON refused")
	}
}
