package controllertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/amqpadmin"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// OnAMQP is a mesh raised on a real RabbitMQ (genesis --bus amqp, the
// broker started from the files genesis wrote), with a NATS server raised
// beside it in this process as an operator raises one (docs/decisions/
// 0012-adoption.md), not adopted yet.
type OnAMQP struct {
	M   *meshdesc.Mesh
	St  store.Store
	Dir string
	O   rollout.Options
	// Config and Monitor are the server's watched file and monitoring
	// endpoint, for rollout.Adopt.
	Config, Monitor string
}

// RaiseOnAMQP raises m on a broker on loopback (its amqp: set to free
// ports), its state in the directory's file store, the management API
// through amqpadmin, bcrypt at its cheapest.
func RaiseOnAMQP(tb testing.TB, ctx context.Context, m *meshdesc.Mesh) *OnAMQP {
	tb.Helper()
	tlsPort, mgmtPort := testutil.FreePort(tb), testutil.FreePort(tb)
	m.AMQP = &meshdesc.AMQP{Names: []string{"127.0.0.1", "localhost"}, Port: tlsPort, Management: "127.0.0.1", ManagementPort: mgmtPort}
	m.Bus.MonitorPort = testutil.FreePort(tb)
	m = Revalidate(tb, m)
	dir := filepath.Join(tb.TempDir(), "state")
	a := &OnAMQP{M: m, St: store.FileStore(dir), Dir: dir, O: rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP,
		AMQPAdmin: amqpadmin.ApplyAs, AMQPClients: amqpadmin.ClientsAs, AMQPRetire: amqpadmin.RetireAs}}
	if _, err := rollout.Genesis(ctx, m, a.St, dir, a.O); err != nil {
		tb.Fatal(err)
	}
	l := statedir.Layout{Dir: dir}
	var f amqptest.Files
	for path, into := range map[string]*[]byte{l.AMQPCert(): &f.CertPEM, l.AMQPKey(): &f.KeyPEM, l.AMQPDefinitions(): &f.Definitions} {
		var err error
		if *into, err = os.ReadFile(path); err != nil {
			tb.Fatal(err)
		}
	}
	amqptest.StartWith(tb, f, tlsPort, amqptest.WithManagementAt(mgmtPort))
	a.Config, a.Monitor = raiseNATSBeside(tb, m, l)
	return a
}

// raiseNATSBeside raises, in this process, the NATS server an operator
// raises beside the broker: its own name, the mesh's bus port, TLS with
// the certificate the mesh minted for the bus's names, JetStream on its
// own store, an account of its own, and a watcher reloading it when its
// file changes, as the nats image's entrypoint does. It returns the file
// and the monitoring endpoint.
func raiseNATSBeside(tb testing.TB, m *meshdesc.Mesh, l statedir.Layout) (config, monitor string) {
	tb.Helper()
	config = filepath.Join(tb.TempDir(), "nats.conf")
	raised := fmt.Sprintf(`{"server_name": "beside", "listen": "127.0.0.1:%d", "http": "127.0.0.1:%d",
"tls": {"cert_file": %q, "key_file": %q}, "jetstream": {"store_dir": %q},
"accounts": {"OPS": {"jetstream": "enabled", "users": [{"user": "ops", "password": "ops-secret"}]}}}
`, m.Bus.Port, m.Bus.MonitorPort, l.ServerCert(), l.ServerKey(), tb.TempDir())
	if err := os.WriteFile(config, []byte(raised), 0o644); err != nil {
		tb.Fatal(err)
	}
	srv := natstest.ServeFile(tb, config)
	natstest.ReloadOnChange(tb, srv, config, 20*time.Millisecond, nil)
	return config, fmt.Sprintf("http://127.0.0.1:%d", m.Bus.MonitorPort)
}
