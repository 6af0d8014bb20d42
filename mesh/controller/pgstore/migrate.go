package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's migrations, numbered from 1 without gaps: NNNN_what.sql.
// One that was released is never edited; a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one file of migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// readMigrations reads the embedded migrations in version order, and
// refuses a name without a number, a number twice or a gap.
func readMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, p := range names {
		name := path.Base(p)
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name is not NNNN_what.sql", name)
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (numbered from 1, without gaps or repeats)", m.name, i+1)
		}
	}
	return ms, nil
}

// Schema is how migrate found the database and left it.
type Schema struct {
	// Version is the newest migration applied, after migrate.
	Version int
	// Applied are the versions this call applied; none when the database
	// was up to date.
	Applied []int
}

// migrate brings the schema up to ms in one transaction: every pending
// migration and its row in schema_migrations commit together, or none
// does. The transaction first takes an advisory lock, so two controllers
// opening one database at once migrate it one after the other; the
// second finds the work done. A database migrated by a newer controller
// (a version beyond ms) is refused: this one would not know its tables.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration) (Schema, error) {
	var sc Schema
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
			return fmt.Errorf("lock for migration: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations ORDER BY version")
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		if n := len(done); n > 0 && done[n-1] > len(ms) {
			return fmt.Errorf("the database's schema is at version %d, newer than this controller's %d: run a newer controller", done[n-1], len(ms))
		}
		for _, m := range ms {
			if slices.Contains(done, m.version) {
				sc.Version = m.version
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			sc.Version = m.version
			sc.Applied = append(sc.Applied, m.version)
		}
		return nil
	})
	if err != nil {
		return Schema{}, err
	}
	return sc, nil
}
