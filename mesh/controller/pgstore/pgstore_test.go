package pgstore_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/controller/storetest"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens the store at dsn, closed when t ends.
func open(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(ctxT(t), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestPostgresStoreKeepsTheContract runs the contract every store keeps on
// PostgreSQL, a fresh database for each case on one server.
func TestPostgresStoreKeepsTheContract(t *testing.T) {
	srv := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dsn := srv.NewDatabase(t)
		return func() store.Store { return open(t, dsn) }
	})
}

// genesis is a state to create, minted the cheap way.
func genesis(t *testing.T) store.State {
	t.Helper()
	ca, err := pki.NewCA("pgstore test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return store.State{
		Secrets:        store.Secrets{wire.ControllerUser: {Password: "pw", Hash: "$2a$04$h"}},
		Authority:      ca,
		Credentials:    map[string][]byte{wire.ControllerUser: []byte(`{"url":"tls://controller:pw@bus:4222"}`)},
		DeclarationKey: key,
	}
}

// migrations reads schema_migrations as (version, applied_at).
func migrations(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var v int
		var name string
		var at time.Time
		if err := rows.Scan(&v, &name, &at); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s %s", v, name, at.Format(time.RFC3339Nano)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrationsApplyOnce: the first open applies every migration and
// records it; a second open applies nothing and leaves the records as
// they were; a database a newer controller migrated is refused.
func TestMigrationsApplyOnce(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	first := open(t, dsn)
	if sc := first.Schema(); sc.Version < 1 || len(sc.Applied) != sc.Version {
		t.Fatalf("expected the first open to apply every migration, got %+v", sc)
	}
	recorded := migrations(t, dsn)
	if len(recorded) != first.Schema().Version {
		t.Fatalf("expected %d migrations recorded, got %q", first.Schema().Version, recorded)
	}
	second := open(t, dsn)
	if sc := second.Schema(); len(sc.Applied) != 0 || sc.Version != first.Schema().Version {
		t.Fatalf("expected the second open to apply nothing, got %+v", sc)
	}
	if again := migrations(t, dsn); !slices.Equal(again, recorded) {
		t.Fatalf("expected schema_migrations unchanged by the second open:\n was %q\n now %q", recorded, again)
	}

	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (999, '0999_from_the_future')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(ctx, dsn); err == nil || errors.Is(err, store.ErrStoreUnavailable) {
		t.Fatalf("expected a database of a newer schema refused (and not as unavailable), got %v", err)
	}
}

// TestOpensAtOnce: controllers opening one new database at the same
// moment all succeed; one of them migrates it, once.
func TestOpensAtOnce(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	const n = 4
	var (
		wg     sync.WaitGroup
		go_    = make(chan struct{})
		stores = make([]*pgstore.Store, n)
		errs   = make([]error, n)
		ctx    = ctxT(t)
	)
	for i := range n {
		wg.Go(func() {
			<-go_
			stores[i], errs[i] = pgstore.Open(ctx, dsn)
		})
	}
	close(go_)
	wg.Wait()
	applied := 0
	for i, st := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		t.Cleanup(st.Close)
		if len(st.Schema().Applied) > 0 {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("expected exactly one open to migrate, %d did", applied)
	}
	if got := migrations(t, dsn); len(got) != stores[0].Schema().Version {
		t.Fatalf("expected each migration recorded once, got %q", got)
	}
	if err := stores[0].Create(ctx, genesis(t)); err != nil {
		t.Fatalf("create through the first handle: %v", err)
	}
	if _, err := stores[n-1].Secrets(ctx); err != nil {
		t.Fatalf("read through the last handle: %v", err)
	}
}

// TestUnreachableIsUnavailable: a server nobody listens for is
// unavailable; a wrong password or a missing database is not (waiting
// would not help).
func TestUnreachableIsUnavailable(t *testing.T) {
	ctx := ctxT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if _, err := pgstore.Open(ctx, "postgres://mesh:mesh@"+closed+"/mesh?sslmode=disable"); !errors.Is(err, store.ErrStoreUnavailable) {
		t.Fatalf("a closed port: expected ErrStoreUnavailable, got %v", err)
	}

	c := pgtest.Start(t).Container
	addr, err := c.Address(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"a wrong password":   fmt.Sprintf("postgres://%s:wrong@%s/%s?sslmode=disable", c.Username, addr, c.Database),
		"a missing database": fmt.Sprintf("postgres://%s:%s@%s/no_such_db?sslmode=disable", c.Username, c.Password, addr),
	} {
		if _, err := pgstore.Open(ctx, bad); err == nil || errors.Is(err, store.ErrStoreUnavailable) {
			t.Errorf("%s: expected an error that is not ErrStoreUnavailable, got %v", name, err)
		}
	}
}
