package rollout_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// beside is a mesh on AMQP (genesis in dir) with a NATS server raised
// beside its broker by an operator: its own name, TLS (the certificate
// the mesh minted for it), JetStream store and account OPS, a stream of
// its own holding three messages, and a watcher that reloads it when its
// file changes, as the nats image's entrypoint does.
type beside struct {
	m       *meshdesc.Mesh
	st      store.Store
	dir     string
	config  string
	monitor string
	srv     *server.Server
	fp      string
}

const opsPassword = "ops-secret"

func raiseBeside(t *testing.T) *beside { return raiseBesideWatched(t, 20*time.Millisecond) }

// raiseBesideWatched is raiseBeside with the server's watcher looking at
// its file every poll.
func raiseBesideWatched(t *testing.T, poll time.Duration) *beside {
	t.Helper()
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	m.Bus.MonitorPort = testutil.FreePort(t)
	m = controllertest.Revalidate(t, m)
	if _, ok := m.Module("nats"); !ok {
		t.Fatal(`the sample declares no module "nats" claiming seat mesh-broker`)
	}
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP}); err != nil {
		t.Fatal(err)
	}
	l := statedir.Layout{Dir: dir}
	cert, err := os.ReadFile(l.ServerCert())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(cert)
	if err != nil {
		t.Fatal(err)
	}
	raised := filepath.Join(t.TempDir(), "nats.conf")
	conf := fmt.Sprintf(`# the operator's, before the mesh knew of it
server_name: beside
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
tls { cert_file: %q, key_file: %q }
jetstream { store_dir: %q }
accounts { OPS { jetstream: enabled, users: [ {user: ops, password: %q} ] } }
`, m.Bus.Port, m.Bus.MonitorPort, l.ServerCert(), l.ServerKey(), t.TempDir(), opsPassword)
	if err := os.WriteFile(raised, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := natstest.ServeFile(t, raised)
	natstest.ReloadOnChange(t, srv, raised, poll, nil)
	b := &beside{m: m, st: st, dir: dir, config: raised, monitor: fmt.Sprintf("http://127.0.0.1:%d", m.Bus.MonitorPort), srv: srv, fp: fp}
	nc := b.dial(t, "ops", opsPassword)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LEDGER", Subjects: []string{"ledger.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "ledger.entry", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	return b
}

func (b *beside) dial(t *testing.T, user, password string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(b.srv.ClientURL(), nats.UserInfo(user, password), nats.Secure(link.PinnedTLS(b.fp, "localhost")))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// heartbeatRoutes says the mesh's accounts are live with their imports
// routed: a host's heartbeat, published in the hosts' account, reaches
// ctl, the controller's connection, in the control account.
func (b *beside) heartbeatRoutes(t *testing.T, ctl *nats.Conn) {
	t.Helper()
	heard, err := ctl.SubscribeSync(wire.NodeAlive("*"))
	if err != nil || ctl.Flush() != nil {
		t.Fatal(err)
	}
	host := b.dial(t, wire.HostUser("node-a"), b.password(t, wire.HostUser("node-a")))
	if err := host.Publish(wire.NodeAlive("node-a"), []byte("{}")); err != nil || host.Flush() != nil {
		t.Fatal(err)
	}
	if _, err := heard.NextMsg(2 * time.Second); err != nil {
		t.Fatalf("expected the host's heartbeat routed into the control account after the adoption: %v", err)
	}
}

// dialWithin connects as user once the server lets it in, within d: what
// a configuration the server takes at its next watcher poll allows.
func (b *beside) dialWithin(t *testing.T, user string, d time.Duration) *nats.Conn {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		nc, err := nats.Connect(b.srv.ClientURL(), nats.UserInfo(user, b.password(t, user)), nats.Secure(link.PinnedTLS(b.fp, "localhost")))
		if err == nil {
			t.Cleanup(nc.Close)
			return nc
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %s, expected %s let in by the adopted server: %v", d, user, err)
		}
	}
}

// withNATSOn is the description with the module claiming the broker's
// seat placed on its node i as well: a second assignment of the seat.
func (b *beside) withNATSOn(i int) *meshdesc.Mesh {
	placed := *b.m
	placed.Nodes = append([]meshdesc.Node(nil), b.m.Nodes...)
	placed.Nodes[i].Modules = append(append([]string(nil), placed.Nodes[i].Modules...), "nats")
	return &placed
}

func (b *beside) password(t *testing.T, user string) string {
	t.Helper()
	secrets, err := b.st.Secrets(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return secrets[user].Password
}

func (b *beside) adopt(t *testing.T, ao rollout.AdoptOptions) (rollout.AdoptResult, error) {
	t.Helper()
	if ao.Config == "" {
		ao.Config = b.config
	}
	if ao.Monitor == "" {
		ao.Monitor = b.monitor
	}
	return rollout.Adopt(controllertest.Ctx(t), b.m, b.st, b.dir, rollout.Options{BcryptCost: bcrypt.MinCost}, ao)
}

// TestTheBareAccountsLoadedAreNotTakenForTheWholeConfiguration: the
// server's load time alone would say the whole configuration is loaded
// while it has the mesh's accounts bare (a reload sets it after applying,
// CI caught the window once); the accounts' imports and exports are
// asked too, and the whole is live when they say so.
func TestTheBareAccountsLoadedAreNotTakenForTheWholeConfiguration(t *testing.T) {
	b := raiseBeside(t)
	ctx := controllertest.Ctx(t)
	raisedData, err := os.ReadFile(b.config)
	if err != nil {
		t.Fatal(err)
	}
	raised, err := compose.ReadRaised(raisedData)
	if err != nil {
		t.Fatal(err)
	}
	composed, err := os.ReadFile(statedir.Layout{Dir: b.dir}.NATSConfig())
	if err != nil {
		t.Fatal(err)
	}
	bare, err := compose.AdoptedBare(raised, composed)
	if err != nil {
		t.Fatal(err)
	}
	full, err := compose.Adopted(raised, composed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.config, bare, 0o644); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 5*time.Second, "the mesh's accounts loaded bare", func() bool {
		_, err := b.srv.LookupAccount(wire.AccountControl)
		return err == nil
	})
	if _, err := rollout.Loaded(ctx, b.monitor, full, time.Time{}, 300*time.Millisecond); err == nil {
		t.Fatal("expected the whole configuration not taken for loaded while the server has the accounts bare")
	}
	if err := os.WriteFile(b.config, full, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Loaded(ctx, b.monitor, full, time.Time{}, 5*time.Second); err != nil {
		t.Fatalf("expected the whole configuration loaded once written: %v", err)
	}
	b.heartbeatRoutes(t, b.dial(t, wire.ControllerUser, b.password(t, wire.ControllerUser)))
}

// TestAdoptionKeepsTheServerItsDataAndConfiguration: the server adopted
// is the same process, its stream and its account are there after, the
// mesh's accounts are live beside its own (the controller logs in as
// itself), the seat is recorded with what the server was raised with, and
// a second adoption is refused.
func TestAdoptionKeepsTheServerItsDataAndConfiguration(t *testing.T) {
	b := raiseBeside(t)
	ctx := controllertest.Ctx(t)
	// Before the adoption the server knows nothing of the mesh.
	if nc, err := nats.Connect(b.srv.ClientURL(), nats.UserInfo(wire.ControllerUser, b.password(t, wire.ControllerUser)),
		nats.Secure(link.PinnedTLS(b.fp, "localhost"))); err == nil {
		nc.Close()
		t.Fatal("expected the controller refused by the server before the adoption")
	}
	raised, _ := os.ReadFile(b.config)
	res, err := b.adopt(t, rollout.AdoptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerID != b.srv.ID() || res.Module != "nats" || res.Seat != wire.BrokerSeat || res.Resumed || res.Live.Before(res.Adopted) {
		t.Errorf("expected the running server adopted into %s by module nats and live after, got %+v (server %s)", wire.BrokerSeat, res, b.srv.ID())
	}
	seats, err := b.st.Seats(ctx)
	if err != nil || len(seats) != 1 || !bytes.Equal(seats[0].Raised, raised) || seats[0].Config != b.config {
		t.Fatalf("expected the seat recorded with what the server was raised with, got %+v, %v", seats, err)
	}
	// The mesh's accounts are live, their imports routed: a host's
	// heartbeat, published in its account, reaches the controller's.
	b.heartbeatRoutes(t, b.dial(t, wire.ControllerUser, b.password(t, wire.ControllerUser)))
	// What the server was raised with is there: its account and its stream.
	js, err := jetstream.New(b.dial(t, "ops", opsPassword))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "LEDGER")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("expected the stream written before the adoption to hold its 3 messages, got %+v, %v", info, err)
	}

	_, err = b.adopt(t, rollout.AdoptOptions{})
	if !errors.Is(err, rollout.ErrAdoption) || !strings.Contains(err.Error(), "held already by the server "+b.srv.ID()) {
		t.Fatalf("expected a second adoption refused naming the first, got %v", err)
	}

	// From then on the controller owns its configuration: a token issued
	// is composed into it, and the server, the same one, lets it in.
	// (Without a broker to make it live there, the issue says so.)
	if _, _, err := rollout.IssueToken(ctx, b.m, b.st, b.dir, "node-b", time.Hour, rollout.Options{BcryptCost: bcrypt.MinCost}); err != nil && !errors.Is(err, rollout.ErrNotLive) {
		t.Fatal(err)
	}
	tokens, err := b.st.Tokens(ctx)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("expected the token issued kept, got %+v, %v", tokens, err)
	}
	b.dialWithin(t, wire.EnrolUser(tokens[0].ID), 5*time.Second)
	if b.srv.ID() != res.ServerID {
		t.Fatal("expected the same server")
	}

	// A description that assigns the seat to a node as well is refused at
	// resolution, naming both assignments, and changes nothing.
	adopted, _ := os.ReadFile(b.config)
	_, err = rollout.Apply(ctx, b.withNATSOn(0), b.st, b.dir, rollout.Options{BcryptCost: bcrypt.MinCost})
	if !errors.Is(err, rollout.ErrUnfit) || !strings.Contains(err.Error(), "held by the server "+b.srv.ID()) ||
		!strings.Contains(err.Error(), `assigned at nodes[0] "node-a"`) {
		t.Fatalf("expected the second assignment refused naming both, got %v", err)
	}
	if now, _ := os.ReadFile(b.config); !bytes.Equal(now, adopted) {
		t.Fatal("expected the adopted server's configuration unchanged by a refused description")
	}
}

// TestAdoptionRefusedChangesNothing: each refusal leaves no seat and the
// server's configuration as it was raised.
func TestAdoptionRefusedChangesNothing(t *testing.T) {
	b := raiseBeside(t)
	raised, _ := os.ReadFile(b.config)
	garbled := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(garbled, []byte("listen: {"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ao   rollout.AdoptOptions
		m    *meshdesc.Mesh
		want string
	}{
		{"no server answers", rollout.AdoptOptions{Monitor: fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t))}, nil, "no NATS server answers at"},
		{"its configuration cannot be read", rollout.AdoptOptions{Config: filepath.Join(t.TempDir(), "missing.conf")}, nil, "read the server's configuration"},
		{"its configuration is not one", rollout.AdoptOptions{Config: garbled}, nil, "nats-server cannot read it"},
		{"the seat assigned to a node", rollout.AdoptOptions{}, b.withNATSOn(1), `seat mesh-broker is assigned at nodes[1] "node-b".modules[1] "nats"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := b.m
			if tc.m != nil {
				m = tc.m
			}
			ao := tc.ao
			if ao.Config == "" {
				ao.Config = b.config
			}
			if ao.Monitor == "" {
				ao.Monitor = b.monitor
			}
			_, err := rollout.Adopt(controllertest.Ctx(t), m, b.st, b.dir, rollout.Options{BcryptCost: bcrypt.MinCost}, ao)
			if !errors.Is(err, rollout.ErrAdoption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("expected ErrAdoption saying %q, got %v", tc.want, err)
			}
			if seats, err := b.st.Seats(controllertest.Ctx(t)); err != nil || len(seats) != 0 {
				t.Fatalf("expected no seat recorded, got %+v, %v", seats, err)
			}
			if now, _ := os.ReadFile(b.config); !bytes.Equal(now, raised) {
				t.Fatalf("expected the server's configuration as it was raised, got:\n%s", now)
			}
		})
	}
}

// TestAnAdoptionStoppedAfterItsCommitIsCompleted: a controller killed
// between recording the seat and writing the configuration leaves the
// seat and the raised file; the running controller (KeepAdopted), or
// adopt run again, completes it, the mesh's imports routed.
func TestAnAdoptionStoppedAfterItsCommitIsCompleted(t *testing.T) {
	for _, how := range []string{"the running controller", "adopt run again"} {
		t.Run(how, func(t *testing.T) {
			b := raiseBeside(t)
			ctx := controllertest.Ctx(t)
			raised, _ := os.ReadFile(b.config)
			// What Adopt commits before it writes anything.
			seat := store.Seat{Name: wire.BrokerSeat, Module: "nats", Server: b.monitor, ServerID: b.srv.ID(), Config: b.config, Raised: raised, Adopted: time.Now()}
			if err := b.st.Update(ctx, func(tx store.Tx) error { return tx.PutSeat(ctx, seat) }); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "the running controller":
				if err := rollout.KeepAdopted(ctx, b.st, b.dir, rollout.Options{}); err != nil {
					t.Fatal(err)
				}
			default:
				res, err := b.adopt(t, rollout.AdoptOptions{})
				if err != nil || !res.Resumed {
					t.Fatalf("expected the adoption resumed, got %+v, %v", res, err)
				}
			}
			// The running controller does not wait for the last load: the
			// server's watcher takes it within its poll.
			b.heartbeatRoutes(t, b.dialWithin(t, wire.ControllerUser, 5*time.Second))
		})
	}
}
