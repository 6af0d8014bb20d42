// Package pgtest runs PostgreSQL in a container for tests and hands each
// test a database of its own: internal/amqptest's twin for the
// controller's store. A test that uses it is skipped in -short mode and
// where no Docker engine answers.
//
// One server serves every test of a test process (Start), and each test
// asks it for a fresh, empty database (NewDatabase: CREATE DATABASE,
// dropped when the test ends), so a contract of many subtests pays for
// one container start, not one each. The server is removed by Main,
// which the package's TestMain calls; a process killed before that (a
// test's timeout) leaves it labelled with its pid (harness/owner), and
// the next test process to start reaps it. A test that stops its server
// gets one of its own (StartOwn).
//
// The image is mesh-postgres:local (MESH_IMAGE_TAG), built from Debian's
// packages by harness/images when it is missing, or the one
// MESH_POSTGRES_IMAGE names.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/internal/testutil"
)

// Server is a running PostgreSQL.
type Server struct {
	// Container is the server's container.
	Container *postgres.PostgresContainer
}

// shared is the process's one server, started by the first Start. It is
// package state on purpose: go test gives a package's tests one process,
// and Main, run once in it, is what removes the server.
var shared struct {
	mu      sync.Mutex
	main    bool // Main is running the tests
	started bool
	srv     *Server
	err     error
}

// Main runs the tests of a package that uses Start, then removes the
// server they shared. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.mu.Unlock()
	if srv != nil {
		if err := testcontainers.TerminateContainer(srv.Container); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove the postgres container: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Start returns the process's server, starting it at the first call (a
// container start of a few seconds, after the image is built if it is
// missing). It skips t in -short mode and where no Docker engine
// answers, and fails it when the package's TestMain does not call Main.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL container tests are skipped in -short mode")
	}
	testutil.DockerClient(t) // skips without an engine
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("pgtest.Start: the package's TestMain must call pgtest.Main(m), which removes the shared server after the tests")
	}
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = start("pgtest")
	}
	if shared.err != nil {
		t.Fatalf("start the shared postgres server: %v", shared.err)
	}
	srv := shared.srv
	t.Cleanup(func() {
		if t.Failed() {
			srv.logTail(t, 40)
		}
	})
	return srv
}

// StartOwn starts a server for t alone, removed when t ends: for a test
// that stops or breaks it.
func StartOwn(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL container tests are skipped in -short mode")
	}
	testutil.DockerClient(t)
	srv, err := start("pgtest-own")
	if srv != nil {
		t.Cleanup(func() {
			if t.Failed() {
				srv.logTail(t, 80)
			}
			if err := testcontainers.TerminateContainer(srv.Container); err != nil {
				t.Errorf("remove the postgres container: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	return srv
}

// start ensures the image and runs a server labelled as this process's.
// The server is returned with an error when its container was made.
func start(who string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	defer docker.Close()
	// Labelled as this process's, so that a process killed before Main
	// removes the server leaves nothing the next one does not reap.
	labels, err := owner.Claim(ctx, docker.Client, who)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: reap the leftovers of dead test runs: %v\n", err)
	}
	b := &images.Builder{Out: io.Discard, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	image, err := postgres.EnsureImage(ctx, b, os.Getenv(postgres.EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		return nil, err
	}
	c, err := postgres.Run(ctx, image, testcontainers.WithLabels(labels))
	if c == nil {
		return nil, err
	}
	return &Server{Container: c}, err
}

// DSN is the URL of database db on the server, from this host. Ask again
// after the server was stopped and started: its port may have changed.
func (s *Server) DSN(t testing.TB, db string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := s.Container.ConnectionStringFor(ctx, db, "application_name=pgtest")
	if err != nil {
		t.Fatalf("postgres address: %v", err)
	}
	return dsn
}

// NewDatabase creates an empty database for t, dropped when t ends, and
// returns its DSN. The drop terminates the connections a test left open.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	name := "t_" + hex.EncodeToString(b)
	if err := s.admin(t, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.admin(t, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return s.DSN(t, name)
}

// admin runs one statement on the server's own database.
func (s *Server) admin(t testing.TB, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN(t, s.Container.Database))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// logTail logs the server's last n lines of log.
func (s *Server) logTail(t testing.TB, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.Container.Logs(ctx)
	if err != nil {
		t.Logf("postgres logs: %v", err)
		return
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Logf("postgres logs: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("postgres logs (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}
