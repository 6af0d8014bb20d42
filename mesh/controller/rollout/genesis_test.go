package rollout_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestGenesisWritesTheState(t *testing.T) {
	m := controllertest.SampleMesh(t)
	dir := filepath.Join(t.TempDir(), "state")
	res, err := rollout.Genesis(controllertest.Ctx(t), m, store.FileStore(dir), dir, rollout.Options{BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	l := statedir.Layout{Dir: dir}

	modes := map[string]os.FileMode{
		l.CACert(): 0o644, l.CAKey(): 0o600, l.Secrets(): 0o600,
		l.NATSConfig(): 0o644, l.ServerCert(): 0o644, l.ServerKey(): 0o600,
	}
	for path, want := range modes {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("expected %s: %v", path, err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: expected mode %v, got %v", path, want, got)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".genesis-") {
			t.Errorf("temporary directory %s left behind", e.Name())
		}
	}

	certPEM, _ := os.ReadFile(l.ServerCert())
	fp, err := pki.Fingerprint(certPEM)
	if err != nil || fp != res.Fingerprint {
		t.Fatalf("fingerprint: expected %s, got %s (%v)", fp, res.Fingerprint, err)
	}
	block, _ := pem.Decode(certPEM)
	cert, _ := x509.ParseCertificate(block.Bytes)
	for _, n := range m.Bus.Names {
		if err := cert.VerifyHostname(n); err != nil {
			t.Errorf("server certificate does not cover bus name %q: %v", n, err)
		}
	}
	caPEM, _ := os.ReadFile(l.CACert())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("server certificate not signed by the written authority: %v", err)
	}

	secrets, err := store.FileStore(dir).Secrets(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	conf, _ := os.ReadFile(l.NATSConfig())
	for _, want := range []string{"/etc/nats/server-cert.pem", "/etc/nats/server-key.pem", `"store_dir": "/data"`} {
		if !bytes.Contains(conf, []byte(want)) {
			t.Errorf("nats.conf: expected %s in it", want)
		}
	}
	principals := compose.Principals(m)
	if len(res.Users) != len(principals) || len(secrets) != len(principals) {
		t.Fatalf("expected %d users, got %d in the result and %d secrets", len(principals), len(res.Users), len(secrets))
	}
	host := link.HostPort(m.Bus.Names[0], m.Bus.Port)
	for _, p := range principals {
		sec := secrets[p.User]
		if len(sec.Password) < 32 {
			t.Errorf("%s: password %d characters, expected at least 32 (24 random bytes)", p.User, len(sec.Password))
		}
		if err := bcrypt.CompareHashAndPassword([]byte(sec.Hash), []byte(sec.Password)); err != nil {
			t.Errorf("%s: hash does not match its password: %v", p.User, err)
		}
		if !bytes.Contains(conf, []byte(sec.Hash)) || bytes.Contains(conf, []byte(sec.Password)) {
			t.Errorf("%s: nats.conf must carry the hash and never the password", p.User)
		}
		path := l.Credential(p.User)
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: expected a 0600 credential file: %v %v", p.User, st, err)
		}
		data, _ := os.ReadFile(path)
		c, err := wire.ParseCredential(data)
		if err != nil {
			t.Fatalf("%s: %v", p.User, err)
		}
		if want := wire.BusURL(p.User, sec.Password, host); c.URL != want {
			t.Errorf("%s: url expected %s, got %s", p.User, want, c.URL)
		}
		if c.Fingerprint != fp {
			t.Errorf("%s: fingerprint expected %s, got %s", p.User, fp, c.Fingerprint)
		}
		want := p.Credential()
		if c.Principal != want.Principal || c.Node != want.Node || c.Module != want.Module || c.Name != want.Name {
			t.Errorf("%s: identity expected %+v, got %+v", p.User, want, c)
		}
	}
	// One of each kind, spelled out rather than derived, so the test does
	// not merely repeat compose.
	kinds := map[string]wire.Credential{
		wire.ControllerUser:                 {Principal: wire.PrincipalController},
		wire.HostUser("node-a"):             {Principal: wire.PrincipalHost, Node: "node-a"},
		wire.ModuleUser("node-b", "logger"): {Node: "node-b", Module: "logger"},
		wire.PersonUser("alice"):            {Principal: wire.PrincipalPerson, Name: "alice"},
		wire.EnrolUser("tok-node-c"):        {Principal: wire.PrincipalEnrol, Name: "tok-node-c"},
	}
	for user, want := range kinds {
		data, err := os.ReadFile(l.Credential(user))
		if err != nil {
			t.Fatalf("expected credentials/%s.json: %v", user, err)
		}
		c, _ := wire.ParseCredential(data)
		if c.Principal != want.Principal || c.Node != want.Node || c.Module != want.Module || c.Name != want.Name {
			t.Errorf("%s: expected %+v, got %+v", user, want, c)
		}
	}
}

func TestSecondGenesisIsRefused(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	before, _ := os.ReadFile(statedir.Layout{Dir: b.Dir}.Secrets())
	_, err := rollout.Genesis(controllertest.Ctx(t), b.M, b.St, b.Dir, b.Opts)
	if !errors.Is(err, store.ErrGenesisExists) || !strings.Contains(err.Error(), "apply") {
		t.Fatalf("expected ErrGenesisExists suggesting apply, got %v", err)
	}
	after, _ := os.ReadFile(statedir.Layout{Dir: b.Dir}.Secrets())
	if !bytes.Equal(before, after) {
		t.Fatal("a refused genesis changed secrets.json")
	}
}

func TestGenesisRefusesLeftovers(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, statedir.NATSDir), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := rollout.Genesis(controllertest.Ctx(t), controllertest.SampleMesh(t), store.FileStore(dir), dir, rollout.Options{BcryptCost: bcrypt.MinCost})
	if !errors.Is(err, store.ErrGenesisExists) || !strings.Contains(err.Error(), statedir.NATSDir) {
		t.Fatalf("expected a refusal naming the leftover nats/, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, statedir.SecretsFile)); err == nil {
		t.Fatal("a refused genesis wrote secrets.json")
	}
}

// TestAnIPv6MonitorIsAConfigurationTheServerReads: the monitoring host is
// joined with its port as nats-server splits it, so an IPv6 address gives
// a file the server starts with, bound to that address alone.
func TestAnIPv6MonitorIsAConfigurationTheServerReads(t *testing.T) {
	m := controllertest.SampleMesh(t)
	m.Bus.Monitor = "::1"
	m = controllertest.Revalidate(t, m)
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	o := rollout.Options{BcryptCost: bcrypt.MinCost, Server: compose.Inputs{ConfigDir: filepath.Join(dir, statedir.NATSDir), StoreDir: filepath.Join(root, "js")}}
	if _, err := rollout.Genesis(controllertest.Ctx(t), m, store.FileStore(dir), dir, o); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(statedir.Layout{Dir: dir}.NATSConfig())
	if err != nil {
		t.Fatalf("nats-server refuses the composed configuration: %v", err)
	}
	if opts.HTTPHost != "::1" || opts.HTTPPort != m.Bus.MonitorPort {
		t.Fatalf("monitoring: expected ::1 port %d, the server reads %q port %d", m.Bus.MonitorPort, opts.HTTPHost, opts.HTTPPort)
	}
}
