package controller

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
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestWriteAMQPMintsEveryPrincipal: every principal of the description,
// the control plane's among them, gets a credential that pins the broker's certificate, names it as the
// credential reader expects, and carries the password whose hash the
// broker's definitions hold.
func TestWriteAMQPMintsEveryPrincipal(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	const addr = "rabbitmq:5671"
	got, err := WriteAMQP(ctxT(t), b.m, b.st, b.dir, addr, AMQPOptions{Names: []string{"rabbitmq"}})
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{b.dir}
	certPEM, err := os.ReadFile(l.AMQPCert())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := b.st.Authority(ctxT(t))
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
	if want := amqpdefs.Users(b.m); !slices.Equal(got.Users, want) {
		t.Fatalf("principals %v, want %v", got.Users, want)
	}
	if want := amqpdefs.ControlUsers(b.m); !slices.Equal(got.ControlUsers, want) {
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
	b := newBed(t, sampleMesh(t))
	opts := AMQPOptions{Names: []string{"rabbitmq"}}
	first, err := WriteAMQP(ctxT(t), b.m, b.st, b.dir, "rabbitmq:5671", opts)
	if err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(b.dir, amqpTemp+"killed", "old")
	if err := os.MkdirAll(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	second, err := WriteAMQP(ctxT(t), b.m, b.st, b.dir, "rabbitmq:5671", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range first.Users {
		a, _ := first.Credential(u, "rabbitmq:5671")
		c, _ := second.Credential(u, "rabbitmq:5671")
		if a.Password() == c.Password() {
			t.Errorf("%s: the password was not rotated", u)
		}
		data, err := os.ReadFile(Layout{b.dir}.AMQPCredential(u))
		if err != nil {
			t.Fatal(err)
		}
		if on, _ := wire.ParseCredential(data); on.Password() != c.Password() {
			t.Errorf("%s: the file holds another password than the second mint's", u)
		}
	}
	if stale, _ := filepath.Glob(filepath.Join(b.dir, amqpTemp+"*")); len(stale) != 0 {
		t.Errorf("leftovers remain: %v", stale)
	}
}

func TestWriteAMQPRefuses(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	if _, err := WriteAMQP(ctxT(t), b.m, b.st, b.dir, "rabbitmq:5671", AMQPOptions{}); err == nil {
		t.Error("a broker without a name was minted")
	}
	if _, err := WriteAMQP(ctxT(t), b.m, b.st, b.dir, "rabbitmq", AMQPOptions{Names: []string{"rabbitmq"}}); err == nil {
		t.Error("an address without a port was taken")
	}
	empty := t.TempDir()
	if _, err := WriteAMQP(ctxT(t), b.m, newFileStore(empty), empty, "rabbitmq:5671", AMQPOptions{Names: []string{"rabbitmq"}}); !errors.Is(err, ErrNoGenesis) {
		t.Errorf("a state without a genesis: %v, want ErrNoGenesis", err)
	}
	if _, err := os.Stat(Layout{b.dir}.AMQP()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused mint wrote %s: %v", Layout{b.dir}.AMQP(), err)
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
