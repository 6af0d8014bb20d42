package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// putStatus commits a status of through through st.
func putStatus(t *testing.T, st store.Store, through uint64) {
	t.Helper()
	ctx := ctxT(t)
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutStatus(ctx, store.Status{Through: through}) }); err != nil {
		t.Fatalf("put status %d: %v", through, err)
	}
}

// unchanged checks that st holds want's secrets and credentials and a
// status through through.
func unchanged(t *testing.T, st store.Store, want store.State, through uint64) {
	t.Helper()
	ctx := ctxT(t)
	if s, err := st.Status(ctx); err != nil || s.Through != through {
		t.Fatalf("expected the status through %d, got %+v (%v)", through, s, err)
	}
	if sec, err := st.Secrets(ctx); err != nil || !reflect.DeepEqual(sec, want.Secrets) {
		t.Fatalf("expected the secrets as created, got %v (%v)", sec, err)
	}
	users, err := st.Credentials(ctx)
	if err != nil || !reflect.DeepEqual(users, []string{wire.ControllerUser}) {
		t.Fatalf("expected only the controller's credential, got %v (%v)", users, err)
	}
}

// TestAStoppedServerIsUnavailable: with the server stopped, every call
// fails with ErrStoreUnavailable, quickly, and an Update's fn is not run;
// started again, the server holds what it held.
func TestAStoppedServerIsUnavailable(t *testing.T) {
	srv := pgtest.StartOwn(t)
	dsn := srv.NewDatabase(t)
	st := open(t, dsn)
	want := genesis(t)
	ctx := ctxT(t)
	if err := st.Create(ctx, want); err != nil {
		t.Fatal(err)
	}
	putStatus(t, st, 5)

	stop := 20 * time.Second
	if err := srv.Container.Stop(ctx, &stop); err != nil {
		t.Fatalf("stop the server: %v", err)
	}
	called := false
	for name, call := range map[string]func(context.Context) error{
		"secrets":         func(ctx context.Context) error { _, err := st.Secrets(ctx); return err },
		"authority":       func(ctx context.Context) error { _, err := st.Authority(ctx); return err },
		"declaration key": func(ctx context.Context) error { _, err := st.DeclarationKey(ctx); return err },
		"credential":      func(ctx context.Context) error { _, err := st.Credential(ctx, wire.ControllerUser); return err },
		"credentials":     func(ctx context.Context) error { _, err := st.Credentials(ctx); return err },
		"status":          func(ctx context.Context) error { _, err := st.Status(ctx); return err },
		"create":          func(ctx context.Context) error { return st.Create(ctx, genesis(t)) },
		"update": func(ctx context.Context) error {
			return st.Update(ctx, func(tx store.Tx) error { called = true; return tx.PutStatus(ctx, store.Status{Through: 9}) })
		},
		"open": func(ctx context.Context) error {
			s, err := pgstore.Open(ctx, dsn)
			if err == nil {
				s.Close()
			}
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		err := call(ctx)
		cancel()
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Errorf("%s with the server stopped: expected ErrStoreUnavailable, got %v", name, err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s with the server stopped: took %s to fail", name, d)
		}
	}
	if called {
		t.Errorf("an update's fn ran with the server stopped")
	}

	if err := srv.Container.Start(ctx); err != nil {
		t.Fatalf("start the server again: %v", err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Its port may be another after the restart.
	again := open(t, srv.DSN(t, cfg.Database))
	unchanged(t, again, want, 5)
	putStatus(t, again, 6)
}

// backendHoldingTheLock is the pid of the backend holding the update lock
// on conn's database: the connection of the Update in progress.
func backendHoldingTheLock(ctx context.Context, conn *pgx.Conn) (int, error) {
	var pid int
	err := conn.QueryRow(ctx, `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
	return pid, err
}

// TestAConnectionKilledMidUpdateKeepsNothing: the Update's connection is
// terminated by the server (pg_terminate_backend, as a crash of its
// backend or an administrator would) after fn wrote, before the commit:
// the Update fails as unavailable, none of its writes is kept, and the
// next Update through the same handle works.
func TestAConnectionKilledMidUpdateKeepsNothing(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	st := open(t, dsn)
	want := genesis(t)
	ctx := ctxT(t)
	if err := st.Create(ctx, want); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	for _, then := range []string{"writes again", "returns nil (the commit fails)"} {
		err := st.Update(ctx, func(tx store.Tx) error {
			if err := errors.Join(
				tx.PutStatus(ctx, store.Status{Through: 7}),
				tx.PutCredential(ctx, wire.PersonUser("carol"), []byte("{}\n")),
				tx.DeleteCredential(ctx, wire.ControllerUser),
				tx.PutSecrets(ctx, store.Secrets{}),
			); err != nil {
				return err
			}
			pid, err := backendHoldingTheLock(ctx, admin)
			if err != nil {
				return err
			}
			// With a timeout, it returns once the backend is gone.
			var gone bool
			if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&gone); err != nil || !gone {
				t.Errorf("terminate backend %d: %v, %v", pid, gone, err)
			}
			if then == "writes again" {
				return tx.PutStatus(ctx, store.Status{Through: 8})
			}
			return nil
		})
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Fatalf("a connection killed, fn %s: expected ErrStoreUnavailable, got %v", then, err)
		}
		unchanged(t, st, want, 0)
	}
	putStatus(t, st, 1)
	unchanged(t, st, want, 1)
}

// TestAContextEndedMidUpdateKeepsNothing: fn's context is cancelled after
// it wrote; the Update returns context.Canceled, not unavailable, and
// keeps nothing. An Update waiting for the lock gives up when its context
// ends, and the one holding it commits.
func TestAContextEndedMidUpdateKeepsNothing(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	st := open(t, dsn)
	want := genesis(t)
	if err := st.Create(ctxT(t), want); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutStatus(ctx, store.Status{Through: 7}); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrStoreUnavailable) {
		t.Fatalf("expected context.Canceled (and not unavailable), got %v", err)
	}
	unchanged(t, st, want, 0)

	other := open(t, dsn)
	holding, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		ctx := context.Background()
		done <- st.Update(ctx, func(tx store.Tx) error {
			close(holding)
			<-release
			return tx.PutStatus(ctx, store.Status{Through: 3})
		})
	}()
	<-holding
	wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer wcancel()
	start := time.Now()
	err = other.Update(wctx, func(tx store.Tx) error { return tx.PutStatus(wctx, store.Status{Through: 99}) })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("an update waiting for the lock past its deadline: expected DeadlineExceeded soon, got %v after %s", err, time.Since(start))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the update holding the lock: %v", err)
	}
	unchanged(t, other, want, 3)
}
