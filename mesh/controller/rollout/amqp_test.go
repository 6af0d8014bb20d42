package rollout_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestWriteAMQPMintsEveryPrincipal: every principal of the description,
// the control plane's among them, gets a credential that pins the broker's certificate, names it as the
// credential reader expects, and carries the password whose hash the
// broker's definitions hold.
func TestWriteAMQPMintsEveryPrincipal(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	const addr = "rabbitmq:5671"
	got, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, b.St, b.Dir, addr, rollout.AMQPOptions{Names: []string{"rabbitmq"}})
	if err != nil {
		t.Fatal(err)
	}
	l := statedir.Layout{Dir: b.Dir}
	certPEM, err := os.ReadFile(l.AMQPCert())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := b.St.Authority(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyServer(ca.CertPEM, certPEM, "rabbitmq"); err != nil {
		t.Errorf("the broker's certificate is not the mesh authority's for rabbitmq: %v", err)
	}
	hashes := map[string]string{}
	for _, u := range got.Definitions.Users {
		hashes[u.Name] = u.PasswordHash
	}
	if want := amqpdefs.Users(b.M); !slices.Equal(got.Users, want) {
		t.Fatalf("principals %v, want %v", got.Users, want)
	}
	if want := amqpdefs.ControlUsers(b.M); !slices.Equal(got.ControlUsers, want) {
		t.Fatalf("control plane principals %v, want %v", got.ControlUsers, want)
	}
	for _, u := range slices.Concat(got.Users, got.ControlUsers) {
		data, err := os.ReadFile(l.AMQPCredential(u))
		if err != nil {
			t.Fatal(err)
		}
		c, err := wire.ParseCredential(data)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		dialled, err := url.Parse(c.URL)
		if err != nil {
			t.Fatal(err)
		}
		if c.User() != u || dialled.Host != addr || c.Fingerprint != fp {
			t.Errorf("%s: user %q address %q fingerprint %q, want %q %q %q", u, c.User(), dialled.Host, c.Fingerprint, u, addr, fp)
		}
		vhost := "/" + wire.AMQPVhost
		if slices.Contains(got.ControlUsers, u) {
			vhost = "/" + wire.AMQPControlVhost
		}
		if dialled.Path != vhost {
			t.Errorf("%s: virtual host %q, want %q", u, dialled.Path, vhost)
		}
		if !passwordMatches(t, hashes[u], c.Password()) {
			t.Errorf("%s: the broker's hash is not of the credential's password", u)
		}
	}
	if info, err := os.Stat(l.AMQPKey()); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the broker's key: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
}

// TestWriteAMQPRotatesWhole: a second mint replaces every password, and
// what a mint killed between its renames left aside (passwords in it) is
// gone after the next one.
func TestWriteAMQPRotatesWhole(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	opts := rollout.AMQPOptions{Names: []string{"rabbitmq"}}
	first, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, b.St, b.Dir, "rabbitmq:5671", opts)
	if err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(b.Dir, statedir.AMQPTemp+"killed", "old")
	if err := os.MkdirAll(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	second, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, b.St, b.Dir, "rabbitmq:5671", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range first.Users {
		a, _ := first.Credential(u, "rabbitmq:5671")
		c, _ := second.Credential(u, "rabbitmq:5671")
		if a.Password() == c.Password() {
			t.Errorf("%s: the password was not rotated", u)
		}
		data, err := os.ReadFile(statedir.Layout{Dir: b.Dir}.AMQPCredential(u))
		if err != nil {
			t.Fatal(err)
		}
		if on, _ := wire.ParseCredential(data); on.Password() != c.Password() {
			t.Errorf("%s: the file holds another password than the second mint's", u)
		}
	}
	if stale, _ := filepath.Glob(filepath.Join(b.Dir, statedir.AMQPTemp+"*")); len(stale) != 0 {
		t.Errorf("leftovers remain: %v", stale)
	}
}

func TestWriteAMQPRefuses(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	if _, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, b.St, b.Dir, "rabbitmq:5671", rollout.AMQPOptions{}); err == nil {
		t.Error("a broker without a name was minted")
	}
	if _, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, b.St, b.Dir, "rabbitmq", rollout.AMQPOptions{Names: []string{"rabbitmq"}}); err == nil {
		t.Error("an address without a port was taken")
	}
	empty := t.TempDir()
	if _, err := rollout.WriteAMQP(controllertest.Ctx(t), b.M, store.FileStore(empty), empty, "rabbitmq:5671", rollout.AMQPOptions{Names: []string{"rabbitmq"}}); !errors.Is(err, store.ErrNoGenesis) {
		t.Errorf("a state without a genesis: %v, want ErrNoGenesis", err)
	}
	if _, err := os.Stat(statedir.Layout{Dir: b.Dir}.AMQP()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused mint wrote %s: %v", statedir.Layout{Dir: b.Dir}.AMQP(), err)
	}
}

// verifyServer checks that certPEM is issued by the authority caPEM for name.
func verifyServer(caPEM, certPEM []byte, name string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no authority certificate")
	}
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		return errors.New("no certificate")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
	return err
}

// passwordMatches checks password against a rabbit_password_hashing_sha256
// hash, as the broker does.
func passwordMatches(t *testing.T, hash, password string) bool {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) < 4 {
		t.Fatalf("hash %q: %v", hash, err)
	}
	return amqpdefs.HashPassword(password, [4]byte(raw[:4])) == hash
}

// The AMQP bus's defaults are the NATS policy's, so both buses give up on
// an event and keep a dead letter alike.
func TestAMQPDefaultsAreThePolicy(t *testing.T) {
	p := natsplane.DefaultPolicy()
	if amqpdefs.DefaultMaxDeliver != p.EventsMaxDeliver || amqpdefs.DefaultDeadMaxAge != p.DeadMaxAge {
		t.Fatalf("expected max deliver %d and dead max age %s, as the controller's policy, got %d and %s",
			p.EventsMaxDeliver, p.DeadMaxAge, amqpdefs.DefaultMaxDeliver, amqpdefs.DefaultDeadMaxAge)
	}
}
