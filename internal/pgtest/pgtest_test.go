package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestDatabasesAreFreshAndApart: two databases of one server are empty
// and do not see each other's tables; the one of a finished test is
// dropped.
func TestDatabasesAreFreshAndApart(t *testing.T) {
	srv := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var first string
	t.Run("first", func(t *testing.T) {
		first = srv.NewDatabase(t)
		conn := connect(t, ctx, first)
		if _, err := conn.Exec(ctx, `CREATE TABLE mine (v int)`); err != nil {
			t.Fatal(err)
		}
		// Left open: the drop must end it.
		second := connect(t, ctx, srv.NewDatabase(t))
		var n int
		if err := second.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("expected the second database empty, it has %d tables (%v)", n, err)
		}
	})
	if srv2 := Start(t); srv2 != srv {
		t.Fatalf("expected one server per process")
	}
	if _, err := pgx.Connect(ctx, first); err == nil {
		t.Fatalf("expected the first test's database dropped once it ended")
	}
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return conn
}
