package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo brings the database at pool to the schema of version, the
// migrations after it left unapplied: a database an older controller
// made, for a test of the migrations that follow.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int) error {
	ms, err := readMigrations(migrationFiles)
	if err != nil {
		return err
	}
	if version < 1 || version > len(ms) {
		return fmt.Errorf("no migration %d (there are %d)", version, len(ms))
	}
	_, err = migrate(ctx, pool, ms[:version])
	return err
}
