// Package natstest starts the real nats-server in-process with the
// configuration composed from a mesh description, for integration tests
// that need the server's own enforcement but no containers.
package natstest

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Server is a running in-process server and every principal's credential.
type Server struct {
	*server.Server
	// Creds maps each user to its credential, pointed at this server.
	Creds map[string]wire.Credential
	// ConfigPath is the configuration file the server was started with.
	ConfigPath string
	// Fingerprint is the server certificate's.
	Fingerprint string
	// DeclarationKey is the controller's signing key; every host's
	// credential carries its public half.
	DeclarationKey ed25519.PrivateKey

	t         testing.TB
	dir       string
	passwords map[string]string
	hashes    map[string]string
}

// Start composes m's configuration with the server on random loopback
// ports and starts it. It is shut down when the test ends.
func Start(t testing.TB, m *meshdesc.Mesh) *Server {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("natstest", now)
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string{"localhost", "127.0.0.1"}, m.Bus.Names...)
	certPEM, keyPEM, err := ca.IssueServer(names, now)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, compose.CertFile), certPEM)
	write(t, filepath.Join(dir, compose.KeyFile), keyPEM)
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, dir: dir, Fingerprint: fp, DeclarationKey: key, passwords: map[string]string{}, hashes: map[string]string{}}
	s.ConfigPath = filepath.Join(dir, compose.ConfigFile)
	s.writeConfig(m)

	s.Server = ServeFile(t, s.ConfigPath)
	s.fillCreds(m)
	return s
}

// ServeFile runs nats-server in-process on the configuration file at
// path, without signals or logs, and waits until it takes connections.
// It is shut down when the test ends; Reload reads path again.
func ServeFile(t testing.TB, path string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("process config %s: %v", path, err)
	}
	opts.NoSigs = true
	opts.NoLog = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("in-process nats-server not ready in 10s")
	}
	return srv
}

// ServeConfig writes conf to a file of the test's and serves it
// (ServeFile); it returns the server and the file, which a test rewrites
// before a Reload.
func ServeConfig(t testing.TB, conf string) (*server.Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), compose.ConfigFile)
	write(t, path, []byte(conf))
	return ServeFile(t, path), path
}

// Apply recomposes the configuration for a changed description and
// reloads the server, as the watcher's SIGHUP does in a container.
func (s *Server) Apply(m *meshdesc.Mesh) {
	s.t.Helper()
	s.writeConfig(m)
	if err := s.Reload(); err != nil {
		s.t.Fatalf("reload: %v", err)
	}
	s.fillCreds(m)
}

// Dial connects as user with its credential.
func (s *Server) Dial(ctx context.Context, user string, opts ...link.Option) (*nats.Conn, error) {
	cred, ok := s.Creds[user]
	if !ok {
		s.t.Fatalf("no credential for user %q", user)
	}
	return link.Dial(ctx, cred, opts...)
}

// Addr is the client address, host:port.
func (s *Server) Addr() string {
	return s.Server.Addr().String()
}

func (s *Server) writeConfig(m *meshdesc.Mesh) {
	s.t.Helper()
	for _, p := range compose.Principals(m) {
		if _, ok := s.hashes[p.User]; ok {
			continue
		}
		pw := "pw-" + p.User
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			s.t.Fatal(err)
		}
		s.passwords[p.User], s.hashes[p.User] = pw, string(h)
	}
	cfg, err := compose.Config(m, compose.Inputs{
		Hashes:    s.hashes,
		ConfigDir: s.dir,
		StoreDir:  filepath.Join(s.dir, "js"),
		Listen:    "127.0.0.1:-1",
		Monitor:   "127.0.0.1:-1",
	})
	if err != nil {
		s.t.Fatal(err)
	}
	write(s.t, s.ConfigPath, cfg)
}

func (s *Server) fillCreds(m *meshdesc.Mesh) {
	s.Creds = map[string]wire.Credential{}
	addr := s.Addr()
	for _, p := range compose.Principals(m) {
		c := p.Credential()
		c.URL = wire.BusURL(p.User, s.passwords[p.User], addr)
		c.Fingerprint = s.Fingerprint
		if c.Principal == wire.PrincipalHost {
			c.DeclarationKey = wire.EncodeDeclarationKey(s.DeclarationKey.Public().(ed25519.PublicKey))
		}
		s.Creds[p.User] = c
	}
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// LeaveAsFound makes the clients connected from now on gone from the
// server by the time tb's cleanups are done (waiting up to 10 s): a
// closed connection's subscriptions and pull requests linger until the
// server has read its end, and would take a share of what the next run on
// this server sends.
func (s *Server) LeaveAsFound(tb testing.TB) {
	before := s.NumClients()
	tb.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for s.NumClients() > before {
			if time.Now().After(deadline) {
				tb.Fatalf("%d clients still connected 10 s after the run, want %d", s.NumClients(), before)
			}
			time.Sleep(time.Millisecond)
		}
	})
}
