package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// broker records what a composition made live through AMQPAdmin, as the
// management API would have been asked.
type broker struct {
	mu      sync.Mutex
	calls   []amqpdefs.Definitions
	asked   []string // endpoint and user of each call
	refuse  error
	secrets []string
}

func (b *broker) apply(_ context.Context, endpoint, user, password string, desired amqpdefs.Definitions) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, endpoint+" "+user)
	b.secrets = append(b.secrets, password)
	if b.refuse != nil {
		return "", b.refuse
	}
	b.calls = append(b.calls, desired)
	return "changed", nil
}

func (b *broker) last(t *testing.T) amqpdefs.Definitions {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		t.Fatal("expected the composition made live on the broker, it was not")
	}
	return b.calls[len(b.calls)-1]
}

func amqpMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m := controllertest.SampleMesh(t)
	m.AMQP = &meshdesc.AMQP{Names: []string{"rabbitmq"}, Port: wire.AMQPPort, Management: "rabbitmq", ManagementPort: meshdesc.DefaultManagementPort}
	return m
}

// TestGenesisOnAMQP: a mesh raised on AMQP has every credential on the
// broker (amqps, the broker's certificate pinned, the control plane's
// users in its virtual host), the broker's files to start with, the
// controller's administrator among them and nowhere else, and one secret
// per principal whose RabbitMQ hash the broker's definitions carry.
func TestGenesisOnAMQP(t *testing.T) {
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	res, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP})
	if err != nil {
		t.Fatal(err)
	}
	if bus, err := rollout.MeshBus(ctx, st); err != nil || bus != rollout.AMQP || res.Bus != rollout.AMQP {
		t.Fatalf("expected the mesh on amqp, got %q (genesis said %q), %v", bus, res.Bus, err)
	}
	l := statedir.Layout{Dir: dir}
	for path, want := range map[string]os.FileMode{l.AMQPCert(): 0o644, l.AMQPKey(): 0o600, l.AMQPDefinitions(): 0o600, l.NATSConfig(): 0o644} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: expected mode %v, got %v", path, want, err)
		}
	}
	certPEM, _ := os.ReadFile(l.AMQPCert())
	fp, _ := pki.Fingerprint(certPEM)
	if fp != res.Fingerprint {
		t.Fatalf("expected genesis to report the broker's fingerprint %s, got %s", fp, res.Fingerprint)
	}
	secrets, err := st.Secrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	control := amqpdefs.ControlUsers(m)
	for _, u := range res.Users {
		doc, err := st.Credential(ctx, u)
		if err != nil {
			t.Fatalf("credential of %s: %v", u, err)
		}
		c, err := wire.ParseCredential(doc)
		if err != nil {
			t.Fatal(err)
		}
		vhost := "/" + wire.AMQPVhost
		if slices.Contains(control, u) {
			vhost = "/" + wire.AMQPControlVhost
		}
		if c.Scheme() != "amqps" || c.Fingerprint != fp || c.Host() != "rabbitmq" || !strings.HasSuffix(c.URL, ":5671"+vhost) || c.Password() != secrets[u].Password {
			t.Errorf("credential of %s: expected amqps://…@rabbitmq:5671%s with the broker's fingerprint and the store's password, got scheme %s host %s fingerprint %s", u, vhost, c.Scheme(), c.HostPort(), c.Fingerprint)
		}
	}
	if _, err := st.Credential(ctx, wire.AMQPAdminUser); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expected no credential document for the administrator, got %v", err)
	}

	var boot amqpdefs.Definitions
	data, _ := os.ReadFile(l.AMQPDefinitions())
	if err := json.Unmarshal(data, &boot); err != nil {
		t.Fatal(err)
	}
	for _, u := range append(slices.Clone(res.Users), wire.AMQPAdminUser) {
		i := slices.IndexFunc(boot.Users, func(b amqpdefs.User) bool { return b.Name == u })
		if i < 0 {
			t.Errorf("expected %s among the broker's first users", u)
			continue
		}
		if boot.Users[i].PasswordHash != amqpdefs.PasswordHash(secrets[u].Password) {
			t.Errorf("%s: expected the hash of the store's password", u)
		}
		wantTags := wire.AMQPOwnerTag
		if u == wire.AMQPAdminUser {
			wantTags = "administrator"
		}
		if boot.Users[i].Tags != wantTags {
			t.Errorf("%s: expected tags %q, got %q", u, wantTags, boot.Users[i].Tags)
		}
	}
	for _, v := range boot.Vhosts {
		if !slices.Contains(boot.Permissions, amqpdefs.Permission{User: wire.AMQPAdminUser, Vhost: v.Name, Configure: ".*", Write: ".*", Read: ".*"}) {
			t.Errorf("expected the administrator to hold every grant in %s, to declare what a composition adds", v.Name)
		}
	}

	// amqp mints a bus beside a mesh on NATS, never over this one.
	if _, err := rollout.WriteAMQP(ctx, m, st, dir, "rabbitmq:5671", rollout.AMQPOptions{Names: []string{"rabbitmq"}}); !errors.Is(err, rollout.ErrUnfit) {
		t.Fatalf("expected amqp refused on a mesh on AMQP, got %v", err)
	}
}

// TestGenesisOnAMQPWithoutABroker is refused, and leaves nothing.
func TestGenesisOnAMQPWithoutABroker(t *testing.T) {
	ctx := controllertest.Ctx(t)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	m := controllertest.SampleMesh(t)
	m.AMQP = nil
	_, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP})
	if !errors.Is(err, rollout.ErrUnfit) || !strings.Contains(err.Error(), "names no broker") {
		t.Fatalf("expected a refusal naming the missing broker, got %v", err)
	}
	if _, err := st.Secrets(ctx); !errors.Is(err, store.ErrNoGenesis) {
		t.Fatalf("expected no genesis in the store, got %v", err)
	}
	for _, d := range []string{statedir.Layout{Dir: dir}.NATS(), statedir.Layout{Dir: dir}.AMQP()} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("expected no %s", d)
		}
	}
}

// TestApplyOnAMQPIsMadeLive: a composition on a mesh on AMQP makes the
// store's users and grants live through the management API as the
// administrator, a new principal with its hash; a broker that does not
// take it leaves the store committed and says so (ErrNotLive), and
// LiveAMQP makes it live later, unchanged.
func TestApplyOnAMQPIsMadeLive(t *testing.T) {
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP}); err != nil {
		t.Fatal(err)
	}
	b := &broker{}
	o := rollout.Options{BcryptCost: bcrypt.MinCost, AMQPAdmin: b.apply}

	m.Persons = append(m.Persons, meshdesc.Person{Name: "ada", Tools: []string{"*"}})
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	b.refuse = errors.New("connection refused")
	if _, err := rollout.Apply(ctx, m, st, dir, o); !errors.Is(err, rollout.ErrNotLive) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("expected ErrNotLive naming the broker's refusal, got %v", err)
	}
	secrets, _ := st.Secrets(ctx)
	ada, ok := secrets[wire.PersonUser("ada")]
	if !ok {
		t.Fatal("expected the person committed to the store though the broker did not take it")
	}
	if _, ok := secrets[wire.AMQPAdminUser]; !ok {
		t.Fatal("expected the administrator's secret kept by the composition")
	}
	if b.asked[0] != "http://rabbitmq:15672 "+wire.AMQPAdminUser || b.secrets[0] != secrets[wire.AMQPAdminUser].Password {
		t.Fatalf("expected the management API asked as the administrator, got %v", b.asked)
	}

	b.refuse = nil
	if err := rollout.LiveAMQP(ctx, m, st, o); err != nil {
		t.Fatal(err)
	}
	d := b.last(t)
	i := slices.IndexFunc(d.Users, func(u amqpdefs.User) bool { return u.Name == wire.PersonUser("ada") })
	if i < 0 || d.Users[i].PasswordHash != amqpdefs.PasswordHash(ada.Password) {
		t.Fatalf("expected ada live with the hash of her one password, got %+v", d.Users)
	}
	if slices.ContainsFunc(d.Users, func(u amqpdefs.User) bool { return u.Name == wire.AMQPAdminUser }) {
		t.Fatal("expected the administrator never among the users a composition changes")
	}
	doc, _ := st.Credential(ctx, wire.PersonUser("ada"))
	if c, _ := wire.ParseCredential(doc); c.Scheme() != "amqps" {
		t.Fatalf("expected ada's credential on the broker, got scheme %q", c.Scheme())
	}
}

// TestLiveAMQPOnNATSDoesNothing: a mesh on NATS has no broker to make
// anything live on.
func TestLiveAMQPOnNATSDoesNothing(t *testing.T) {
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost}); err != nil {
		t.Fatal(err)
	}
	b := &broker{}
	if err := rollout.LiveAMQP(ctx, m, st, rollout.Options{AMQPAdmin: b.apply}); err != nil || len(b.asked) != 0 {
		t.Fatalf("expected nothing asked of a broker, got %v, %v", b.asked, err)
	}
	if _, err := rollout.Apply(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, AMQPAdmin: b.apply}); err != nil || len(b.asked) != 0 {
		t.Fatalf("expected an apply on NATS to ask no broker, got %v, %v", b.asked, err)
	}
}

// TestAPushTheBrokerDoesNotTakeIsKeptAndMadeLiveLater: a push on a mesh on
// AMQP whose management API does not answer, or refuses the
// administrator, is committed whole (the description, the nodes'
// declarations at their next revision, the ledger entry, a new person's
// user) and says so: ErrNotLive naming the management API's address and
// what went wrong, never the administrator's password. Delivered again
// while the API is away, it is recognised and applies nothing twice; once
// the API answers, LiveAMQP makes the store's users live, and the push
// delivered again is done.
func TestAPushTheBrokerDoesNotTakeIsKeptAndMadeLiveLater(t *testing.T) {
	for why, refusal := range map[string]error{
		"does not answer":           errors.New("dial tcp: connection refused"),
		"refuses the administrator": errors.New("401 Unauthorized"),
	} {
		t.Run(why, func(t *testing.T) {
			ctx := controllertest.Ctx(t)
			m := amqpMesh(t)
			dir := filepath.Join(t.TempDir(), "state")
			st := store.FileStore(dir)
			if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP}); err != nil {
				t.Fatal(err)
			}
			secrets, _ := st.Secrets(ctx)
			adminPassword := secrets[wire.AMQPAdminUser].Password
			b := &broker{refuse: refusal}
			o := rollout.Options{BcryptCost: bcrypt.MinCost, AMQPAdmin: b.apply}

			pushed := *m
			pushed.Modules = slices.Clone(m.Modules)
			pushed.Modules[0].Version = "2.0.0"
			pushed.Persons = append(slices.Clone(m.Persons), meshdesc.Person{Name: "ada", Tools: []string{"*"}})
			y, err := yaml.Marshal(controllertest.Revalidate(t, &pushed))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(wire.Push{Mesh: string(y)})
			key := store.LedgerKey(wire.SubjectPush, "p1", 1)

			_, err = rollout.Push(ctx, st, dir, key, body, o)
			if !errors.Is(err, rollout.ErrNotLive) || !strings.Contains(err.Error(), "http://rabbitmq:15672") || !strings.Contains(err.Error(), refusal.Error()) {
				t.Fatalf("expected ErrNotLive naming the management API's address and what it said, got %v", err)
			}
			if strings.Contains(err.Error(), adminPassword) {
				t.Fatalf("the error carries the administrator's password: %v", err)
			}
			committed := func(when string) {
				t.Helper()
				if d, err := st.Description(ctx); err != nil || string(d) != string(y) {
					t.Fatalf("%s: expected the pushed description in the store, got %v", when, err)
				}
				if _, err := st.Applied(ctx, key); err != nil {
					t.Fatalf("%s: expected the push's ledger entry, got %v", when, err)
				}
				decls, _ := st.Declared(ctx)
				for _, d := range decls {
					if d.Revision != 1 {
						t.Fatalf("%s: %s at revision %d, want 1 (the push applied once)", when, d.Node, d.Revision)
					}
				}
				if s, _ := st.Secrets(ctx); s[wire.PersonUser("ada")].Password == "" {
					t.Fatalf("%s: expected ada's user kept in the store", when)
				}
			}
			committed("after the push")

			// Delivered again while the API is still away: recognised,
			// still not live.
			again, err := rollout.Push(ctx, st, dir, key, body, o)
			if !again.Replayed || !errors.Is(err, rollout.ErrNotLive) {
				t.Fatalf("expected the push recognised and still not live, got %+v, %v", again, err)
			}
			committed("after the push came again")

			b.mu.Lock()
			b.refuse = nil
			b.mu.Unlock()
			if err := rollout.LiveAMQP(ctx, m, st, o); err != nil {
				t.Fatal(err)
			}
			d := b.last(t)
			if !slices.ContainsFunc(d.Users, func(u amqpdefs.User) bool { return u.Name == wire.PersonUser("ada") }) {
				t.Fatalf("expected ada live once the API answers, got %+v", d.Users)
			}
			if again, err := rollout.Push(ctx, st, dir, key, body, o); err != nil || !again.Replayed {
				t.Fatalf("expected the push delivered again done, got %+v, %v", again, err)
			}
			committed("once live")
		})
	}
}

// TestATokenTheBrokerDoesNotTakeIsKeptAndNamed: a token issued on a mesh
// on AMQP whose management API does not answer is kept with its
// credential, and the error (ErrNotLive) names it and the API's address,
// so that nothing issued is lost with the error; LiveAMQP makes its user
// live once the API answers.
func TestATokenTheBrokerDoesNotTakeIsKeptAndNamed(t *testing.T) {
	ctx := controllertest.Ctx(t)
	m := amqpMesh(t)
	dir := filepath.Join(t.TempDir(), "state")
	st := store.FileStore(dir)
	if _, err := rollout.Genesis(ctx, m, st, dir, rollout.Options{BcryptCost: bcrypt.MinCost, Bus: rollout.AMQP}); err != nil {
		t.Fatal(err)
	}
	b := &broker{refuse: errors.New("dial tcp: connection refused")}
	o := rollout.Options{BcryptCost: bcrypt.MinCost, AMQPAdmin: b.apply}
	_, _, err := rollout.IssueToken(ctx, m, st, dir, m.Nodes[0].Name, time.Hour, o)
	if !errors.Is(err, rollout.ErrNotLive) || !strings.Contains(err.Error(), "http://rabbitmq:15672") {
		t.Fatalf("expected ErrNotLive naming the management API's address, got %v", err)
	}
	tokens, _ := st.Tokens(ctx)
	if len(tokens) != 1 || !strings.Contains(err.Error(), tokens[0].ID) {
		t.Fatalf("expected the one token kept and named by the error, got %+v, %v", tokens, err)
	}
	user := wire.EnrolUser(tokens[0].ID)
	if _, err := st.Credential(ctx, user); err != nil {
		t.Fatalf("expected the token's credential kept, got %v", err)
	}
	b.mu.Lock()
	b.refuse = nil
	b.mu.Unlock()
	if err := rollout.LiveAMQP(ctx, m, st, o); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(b.last(t).Users, func(u amqpdefs.User) bool { return u.Name == user }) {
		t.Fatalf("expected %s live once the API answers", user)
	}
}
