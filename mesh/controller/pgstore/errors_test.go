package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// connectErr is what pgx gives when a connection cannot be made: a
// ConnectError around the cause. The struct's fields are pgx's; this one
// is made the way pgx makes it, by failing to connect.
func connectErr(t *testing.T, dsn string) error {
	t.Helper()
	_, err := pgconn.Connect(context.Background(), dsn)
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("expected a ConnectError from %s, got %T %v", dsn, err, err)
	}
	return err
}

func TestWhatIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"connection refused":         {connectErr(t, "postgres://u:p@"+closed+"/db?connect_timeout=2"), true},
		"connection failure 08006":   {pg("08006"), true},
		"admin shutdown 57P01":       {pg("57P01"), true},
		"starting up 57P03":          {pg("57P03"), true},
		"too many connections 53300": {pg("53300"), true},
		"disk full 53100":            {pg("53100"), true},
		"a standby 25006":            {pg("25006"), true},
		"connection lost (EOF)":      {io.ErrUnexpectedEOF, true},
		"conn closed":                {pgconn.ErrConnClosed, true},
		"reset by peer":              {&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		"deadline":                   {context.DeadlineExceeded, true},
		"unique violation 23505":     {pg("23505"), false},
		"undefined table 42P01":      {pg("42P01"), false},
		"wrong password 28P01":       {pg("28P01"), false},
		"no such database 3D000":     {pg("3D000"), false},
		"serialization 40001":        {pg("40001"), false},
		"a handler's error":          {errors.New("refused"), false},
		"cancelled by the caller":    {context.Canceled, false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): expected unavailable %v, got %v", name, c.err, c.want, got)
		}
	}
}

func TestStoreErr(t *testing.T) {
	bg := context.Background()
	if err := storeErr(bg, "read status", io.ErrUnexpectedEOF); !errors.Is(err, store.ErrStoreUnavailable) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "read status: ") {
		t.Errorf("a lost connection: expected ErrStoreUnavailable around the cause, got %v", err)
	}
	if err := storeErr(bg, "x", &pgconn.PgError{Code: "23505"}); errors.Is(err, store.ErrStoreUnavailable) {
		t.Errorf("a constraint violation read as unavailable: %v", err)
	}
	once := storeErr(bg, "inner", io.EOF)
	if err := storeErr(bg, "outer", once); strings.Count(err.Error(), store.ErrStoreUnavailable.Error()) != 1 {
		t.Errorf("expected ErrStoreUnavailable said once, got %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	// Cancelled, pgx closes the connection: what follows is not the
	// store's absence.
	if err := storeErr(ctx, "update", io.ErrUnexpectedEOF); errors.Is(err, store.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("a call the caller cancelled: expected context.Canceled and not unavailable, got %v", err)
	}
	if storeErr(bg, "x", nil) != nil {
		t.Errorf("expected nil for nil")
	}
}

func TestReadMigrations(t *testing.T) {
	ms, err := readMigrations(migrationFiles)
	if err != nil || len(ms) == 0 || ms[0].version != 1 || ms[0].name != "0001_state" {
		t.Fatalf("expected the embedded migrations from 0001_state, got %v (%v)", ms, err)
	}
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	got, err := readMigrations(fstest.MapFS{"migrations/0002_b.sql": file("B"), "migrations/0001_a.sql": file("A"), "migrations/README": file("x")})
	if err != nil || len(got) != 2 || got[0].sql != "A" || got[1].name != "0002_b" {
		t.Fatalf("expected 0001_a then 0002_b, got %v (%v)", got, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"a gap":     {"migrations/0001_a.sql": file("A"), "migrations/0003_c.sql": file("C")},
		"a repeat":  {"migrations/0001_a.sql": file("A"), "migrations/001_b.sql": file("B")},
		"no number": {"migrations/first.sql": file("A")},
		"from zero": {"migrations/0000_a.sql": file("A")},
	} {
		if _, err := readMigrations(fsys); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}
