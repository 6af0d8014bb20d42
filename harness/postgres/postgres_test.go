package postgres

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/testcontainers/testcontainers-go"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/internal/testutil"
)

// TestPostgres ensures the image (ours, unless MESH_POSTGRES_IMAGE names
// another), starts servers with a user and database of the test's, and
// checks what the controller's store relies on: the user connects with
// its password from this host and owns the database, a wrong password is
// refused, and a stopped and started container keeps its data. Once for
// the default user and database, which our image starts from the cluster
// it carries, and once for others, for which it makes its own.
func TestPostgres(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	var out bytes.Buffer
	b := &images.Builder{Out: &out, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	defer func() { t.Logf("builder output:\n%s", out.String()) }()
	start := time.Now()
	image, err := EnsureImage(ctx, b, os.Getenv(EnvImage), images.DebianFromEnv(os.Getenv))
	if err != nil {
		t.Fatalf("ensure image: %v", err)
	}
	t.Logf("image %s ready in %s", image, time.Since(start).Round(100*time.Millisecond))

	labels, err := owner.Claim(ctx, cli.Client, "postgres-test")
	if err != nil {
		t.Logf("reap the leftovers of dead test runs: %v", err)
	}
	for _, tc := range []struct{ name, user, password, db string }{
		{"the image's cluster", DefaultUsername, "it's a s3cret", DefaultDatabase},
		{"a cluster of its own", "ctl", "s3cret pw", "mesh-state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serves(ctx, t, image, labels, tc.user, tc.password, tc.db)
		})
	}
	t.Run("recycled and reused, it holds nothing of before", func(t *testing.T) {
		recycles(ctx, t, image, labels)
	})
}

// recycles runs a server, leaves a table in its database, recycles it and
// reuses it with another password: the table is gone, the database is
// the user's, the old password is refused and the new one taken. Reuse
// for another user, and a recycling of a server holding a role of its
// own, are refused with ErrNotReusable.
func recycles(ctx context.Context, t *testing.T, image string, labels map[string]string) {
	c := runServer(ctx, t, image, labels, WithPassword("first's"))
	connect := func(password string) (*pgx.Conn, error) {
		addr, err := c.Address(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pgx.Connect(ctx, URL(addr, c.Username, password, c.Database))
	}
	conn, err := connect("first's")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE left_behind (v text); INSERT INTO left_behind VALUES ('the first user''s')`); err != nil {
		t.Fatal(err)
	}
	// An open connection does not keep the database from being dropped.
	defer conn.Close(context.Background())

	start := time.Now()
	if err := c.Recycle(ctx); err != nil {
		t.Fatalf("recycle: %v", err)
	}
	if err := c.Reuse(ctx, WithPassword("second's")); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	t.Logf("recycled and reused in %s", time.Since(start).Round(time.Millisecond))
	var pe *pgconn.PgError
	if _, err := connect("first's"); !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("expected the first password refused with 28P01, got %v", err)
	}
	second, err := connect("second's")
	if err != nil {
		t.Fatalf("connect with the second password: %v", err)
	}
	defer second.Close(context.Background())
	var gone bool
	var dbOwner string
	if err := second.QueryRow(ctx, `SELECT to_regclass('left_behind') IS NULL, (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database())`).Scan(&gone, &dbOwner); err != nil {
		t.Fatal(err)
	}
	if !gone || dbOwner != c.Username {
		t.Errorf("expected the table left behind gone and the database %s's, got gone=%v, owned by %s", c.Username, gone, dbOwner)
	}

	if err := c.Reuse(ctx, WithUsername("other"), WithPassword("x")); !errors.Is(err, ErrNotReusable) {
		t.Errorf("expected reuse for another user refused with ErrNotReusable, got %v", err)
	}
	if _, err := second.Exec(ctx, `CREATE ROLE stray`); err != nil {
		t.Fatal(err)
	}
	if err := c.Recycle(ctx); !errors.Is(err, ErrNotReusable) || !strings.Contains(err.Error(), "role stray") {
		t.Errorf("expected a server holding a role of its own refused with ErrNotReusable, naming it, got %v", err)
	}
}

// serves runs a server from image for user, password and db, and checks
// it as TestPostgres says.
func serves(ctx context.Context, t *testing.T, image string, labels map[string]string, user, password, db string) {
	start := time.Now()
	c := runServer(ctx, t, image, labels, WithUsername(user), WithPassword(password), WithDatabase(db))
	t.Logf("server ready in %s", time.Since(start).Round(100*time.Millisecond))
	ins, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[owner.LabelRun] != labels[owner.LabelRun] || ins.Config.StopSignal != "SIGINT" {
		t.Errorf("expected the caller's labels and stop signal SIGINT, got %v, %q", ins.Config.Labels, ins.Config.StopSignal)
	}

	dsn, err := c.ConnectionString(ctx, "application_name=postgres-test")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect as ctl: %v", err)
	}
	var gotUser, gotDB, method, dbOwner string
	if err := conn.QueryRow(ctx, `SELECT current_user, current_database(), (SELECT auth_method FROM pg_hba_file_rules WHERE type = 'host' LIMIT 1),
		(SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database())`).Scan(&gotUser, &gotDB, &method, &dbOwner); err != nil {
		t.Fatal(err)
	}
	if gotUser != user || gotDB != db || method != "scram-sha-256" || dbOwner != user {
		t.Errorf("expected %s on %s, owned by %s, through scram-sha-256, got %s on %s, owned by %s, through %s", user, db, user, gotUser, gotDB, dbOwner, method)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the restart')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	addr, err := c.Address(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if _, err := pgx.Connect(ctx, URL(addr, user, "wrong", db)); !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("expected a wrong password refused with 28P01 (invalid_password), got %v", err)
	}

	// Stopped (a fast shutdown: SIGINT) and started, the server comes back
	// with its data; the port may be another.
	stop := 20 * time.Second
	start = time.Now()
	if err := c.Stop(ctx, &stop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("expected a fast shutdown, docker stop took %s", d)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start again: %v", err)
	}
	dsn, err = c.ConnectionString(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != "before the restart" {
		t.Fatalf("expected the row written before the restart, got %q (%v)", v, err)
	}
}

// runServer runs a server from image with opts and the test's labels,
// terminated when the test ends (its logs shown if the test failed).
func runServer(ctx context.Context, t *testing.T, image string, labels map[string]string, opts ...testcontainers.ContainerCustomizer) *PostgresContainer {
	t.Helper()
	c, err := Run(ctx, image, append(opts, testcontainers.WithLabels(labels))...)
	if c != nil {
		testutil.TerminateAtCleanup(t, c)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return c
}
