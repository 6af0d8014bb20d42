package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// ErrNotReusable is a server Recycle or Reuse cannot hand on: it holds
// what a recycling does not put back (another role, another database, a
// setting changed with ALTER SYSTEM), or it was started for another user
// or database than the one asked for.
var ErrNotReusable = errors.New("postgres server not reusable")

// Recycle empties the server of what its last user left: the database is
// dropped, its connections ended (WITH (FORCE)), and made again, empty,
// from template0, which no one can connect to and so no one changed. A
// server that holds a role or a database besides the user's and the
// cluster's own, or a setting made with ALTER SYSTEM, is refused with
// ErrNotReusable: a recycling does not know how to put those back. The
// server keeps running, so Reuse costs a statement, where a new container
// costs the engine about 2.5 core-seconds (docs/decisions/0014, tenth
// stop).
func (c *PostgresContainer) Recycle(ctx context.Context) error {
	db, user := quoteIdent(c.Database), quoteIdent(c.Username)
	if _, err := c.psql(ctx, "postgres",
		"DROP DATABASE IF EXISTS "+db+" WITH (FORCE)",
		"CREATE DATABASE "+db+" OWNER "+user+" TEMPLATE template0",
	); err != nil {
		return fmt.Errorf("recycle postgres: %w", err)
	}
	left, err := c.psql(ctx, "postgres", `SELECT 'role ' || rolname FROM pg_roles WHERE rolname !~ '^pg_' AND rolname <> `+quoteLiteral(c.Username)+`
		UNION ALL SELECT 'database ' || datname FROM pg_database WHERE datname NOT IN ('postgres', 'template0', 'template1', `+quoteLiteral(c.Database)+`)
		UNION ALL SELECT 'setting ' || name FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'`)
	if err != nil {
		return fmt.Errorf("recycle postgres: %w", err)
	}
	if left = strings.TrimSpace(left); left != "" {
		return fmt.Errorf("recycle postgres: %w: it holds %s", ErrNotReusable, strings.ReplaceAll(left, "\n", ", "))
	}
	return nil
}

// Reuse gives a recycled server the password opts set (WithPassword); the
// user and database must be those it was started with (WithUsername,
// WithDatabase, or the defaults), or Reuse fails with ErrNotReusable and
// changes nothing. The password goes in an ALTER ROLE statement over the
// container's own socket, as the image's first start sets it; the server
// keeps its SCRAM verifier, not it.
func (c *PostgresContainer) Reuse(ctx context.Context, opts ...testcontainers.ContainerCustomizer) error {
	s := settings{user: DefaultUsername, password: DefaultPassword, database: DefaultDatabase}
	for _, o := range opts {
		if apply, ok := o.(Option); ok {
			apply(&s)
		}
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("reuse postgres: %w", err)
	}
	if s.user != c.Username || s.database != c.Database {
		return fmt.Errorf("reuse postgres: %w: it serves %s on %s, not %s on %s", ErrNotReusable, c.Username, c.Database, s.user, s.database)
	}
	if _, err := c.psql(ctx, "postgres", "ALTER ROLE "+quoteIdent(s.user)+" PASSWORD "+quoteLiteral(s.password)); err != nil {
		return fmt.Errorf("reuse postgres: %w", err)
	}
	c.Password = s.password
	return nil
}

// psql runs each statement in turn (each its own transaction: DROP
// DATABASE takes none) as the server's user on db, through the
// container's own socket, and returns what they printed, unaligned.
func (c *PostgresContainer) psql(ctx context.Context, db string, statements ...string) (string, error) {
	cmd := []string{"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-U", c.Username, "-d", db}
	for _, s := range statements {
		cmd = append(cmd, "-c", s)
	}
	code, r, err := c.Exec(ctx, cmd, tcexec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("psql: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("psql: read its output: %w", err)
	}
	if code != 0 {
		return "", fmt.Errorf("psql exited %d: %s", code, withoutStatement(string(out)))
	}
	return string(out), nil
}

// withoutStatement is psql's error output without the lines quoting the
// statement (LINE n: … and its caret), which for ALTER ROLE would quote
// the password.
func withoutStatement(out string) string {
	var kept []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "LINE ") || strings.Trim(line, " ^") == "" {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}

// quoteIdent is name as an SQL identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// quoteLiteral is s as an SQL string literal (standard_conforming_strings
// is on, PostgreSQL's default: a backslash is a backslash).
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
