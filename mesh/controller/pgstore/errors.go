package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// unavailableCodes are the SQLSTATEs, beyond classes 08 (connection
// exception) and 53 (insufficient resources), of a server that cannot
// take a call now though the call was not wrong: waiting, or a person
// bringing the server back, helps.
var unavailableCodes = []string{
	"57P01", // admin_shutdown: the server is stopping, or the backend was terminated
	"57P02", // crash_shutdown: another backend crashed, the server restarts
	"57P03", // cannot_connect_now: starting up, or in recovery
	"57P05", // idle_session_timeout
	"58030", // io_error: the server's disk failing
	"25006", // read_only_sql_transaction: a standby, until the primary is back
}

// unavailable reports whether err says the server could not be reached or
// could not take the call: a connection refused, lost or timed out, the
// server shutting down, starting or in recovery, out of connections,
// memory or disk. A constraint violation, a bad query, a password
// refused or a database missing is not: waiting would not help.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// What the server said decides, also inside a ConnectError: a
		// password refused (28P01) or a database missing (3D000) is the
		// DSN's fault, not the server's absence.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || slices.Contains(unavailableCodes, pe.Code)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// storeErr is err with what it was doing, wrapping
// controller.ErrStoreUnavailable when the server is away. A call the
// caller cancelled is not the store's absence: its error is returned
// wrapping context.Canceled alone. A deadline that passed is: a server
// that does not answer in time is treated like one that refuses.
func storeErr(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		if !errors.Is(err, context.Canceled) {
			err = errors.Join(context.Canceled, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if errors.Is(err, store.ErrStoreUnavailable) || !unavailable(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, store.ErrStoreUnavailable, err)
}
