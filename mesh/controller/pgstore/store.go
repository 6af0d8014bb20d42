// Package pgstore keeps the controller's state (controller.Store) in
// PostgreSQL, through a pgx connection pool. The database must be the
// controller's alone: it holds every principal's password, the mesh's
// authority and the key declarations are signed with.
//
// Open applies the embedded schema migrations (migrations/, recorded in
// schema_migrations) in one transaction under an advisory lock, so two
// controllers opening one database at once both succeed. Every Update is
// one READ COMMITTED transaction that takes a second advisory lock first:
// updates through any number of handles and processes run one at a time,
// each seeing what the ones before it committed, and fn's writes commit
// together or not at all. Create is one transaction too. Reads outside an
// Update are single statements.
//
// A connection refused, lost or timed out, and a server shutting down,
// starting, in recovery or out of resources give errors wrapping
// controller.ErrStoreUnavailable (see unavailable); docs/controller-store.md
// says why the store has this shape and which tests show it.
package pgstore

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Advisory lock keys ("meshmigr", "meshupdt"). Advisory locks are per
// database, and the database is the controller's alone.
const (
	migrateLock int64 = 0x6d6573686d696772
	updateLock  int64 = 0x6d65736875706474
)

// DefaultConnectTimeout bounds one connection attempt when the DSN names
// no connect_timeout: a server whose packets are dropped fails the call
// as unavailable rather than hanging for the caller's whole deadline.
const DefaultConnectTimeout = 5 * time.Second

// Store is the controller's state in one PostgreSQL database.
type Store struct {
	view
	pool   *pgxpool.Pool
	schema Schema
}

var _ store.Store = (*Store)(nil)

// Open connects to the database dsn names (a postgres:// URL or
// key=value pairs, as pgx reads them) and brings its schema up to date.
// The server down or unreachable is an error wrapping
// controller.ErrStoreUnavailable; the same call may succeed later. Close
// the store when done.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's error says what was wrong with the DSN and hides its
		// password.
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, storeErr(ctx, "open postgres store", err)
	}
	ms, err := readMigrations(migrationFiles)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	schema, err := migrate(ctx, pool, ms)
	if err != nil {
		pool.Close()
		return nil, storeErr(ctx, "open postgres store: migrate", err)
	}
	return &Store{view: view{q: pool}, pool: pool, schema: schema}, nil
}

// Close closes the pool, waiting for the connections in use to be
// returned.
func (s *Store) Close() { s.pool.Close() }

// Schema is what Open found and did: the schema's version, and the
// migrations it applied.
func (s *Store) Schema() Schema { return s.schema }

// Create records the genesis in one transaction: everything, or nothing.
func (s *Store) Create(ctx context.Context, st store.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := check(st); err != nil {
		return err
	}
	key := slices.Clone([]byte(st.DeclarationKey))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO genesis (authority_cert, authority_key) VALUES ($1, $2) ON CONFLICT (one) DO NOTHING`,
			st.Authority.CertPEM, st.Authority.KeyPEM)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: the database holds its secrets; use apply to change an existing mesh", store.ErrGenesisExists)
		}
		if err := upsertSecrets(ctx, tx, st.Secrets); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO declaration_key (key) VALUES ($1)`, key); err != nil {
			return err
		}
		users, docs := make([]string, 0, len(st.Credentials)), make([][]byte, 0, len(st.Credentials))
		for u, d := range st.Credentials {
			users, docs = append(users, u), append(docs, d)
		}
		_, err = tx.Exec(ctx, `INSERT INTO credentials (username, document) SELECT * FROM unnest($1::text[], $2::bytea[])`, users, docs)
		return err
	})
	if err != nil {
		return storeErr(ctx, "create genesis", err)
	}
	return nil
}

// check refuses a state with a part missing.
func check(st store.State) error {
	if st.Authority == nil || len(st.Authority.CertPEM) == 0 || len(st.Authority.KeyPEM) == 0 {
		return errors.New("genesis: no authority")
	}
	if len(st.DeclarationKey) != ed25519.PrivateKeySize {
		return errors.New("genesis: no declaration key")
	}
	for u := range st.Secrets {
		if err := checkUser(u); err != nil {
			return fmt.Errorf("genesis: secret: %w", err)
		}
	}
	for u, doc := range st.Credentials {
		if err := checkUser(u); err != nil {
			return fmt.Errorf("genesis: %w", err)
		}
		if len(doc) == 0 {
			return fmt.Errorf("genesis: credential of %s: empty document", u)
		}
	}
	return nil
}

// checkUser refuses what is no user name: empty, or with a byte
// PostgreSQL's text cannot hold.
func checkUser(user string) error {
	if user == "" || strings.ContainsRune(user, 0) {
		return fmt.Errorf("credential: %q is not a user name", user)
	}
	return nil
}

// inTx runs fn in one READ COMMITTED transaction holding the update lock,
// and commits when fn returns nil. READ COMMITTED, not REPEATABLE READ:
// each statement reads what was committed when it began, so the
// statements after the lock see every update that held it before; a
// snapshot taken by the lock's own statement would not.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer func() {
		// After a commit this does nothing. After a failure it returns the
		// connection clean, even when ctx has ended (pgx closes a
		// connection whose rollback fails, and the server rolls back).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", updateLock); err != nil {
		return fmt.Errorf("take the update lock: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Update runs fn in one transaction, one Update at a time across every
// handle on the database, and commits its writes when it returns nil.
// fn's own error is returned as it is. A commit interrupted by the
// connection failing is unavailable, but may have committed: PostgreSQL
// alone knows, and the caller's redelivery finds out by reading.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var fnErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		t := &pgTx{view: view{q: tx}}
		defer t.end()
		fnErr = fn(t)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return storeErr(ctx, "update", err)
	}
	return nil
}

// querier is what a read needs: the pool, or the transaction of an
// Update.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// view reads the state through q.
type view struct{ q querier }

func (v view) Secrets(ctx context.Context) (store.Secrets, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// One statement: no row without a genesis, one row of NULLs for a
	// genesis without secrets.
	rows, err := v.q.Query(ctx, `SELECT s.username, s.password, s.hash FROM genesis g LEFT JOIN secrets s ON true`)
	if err != nil {
		return nil, storeErr(ctx, "read secrets", err)
	}
	var (
		found    bool
		u, p, h  *string
		out      = store.Secrets{}
		scanInto = []any{&u, &p, &h}
	)
	_, err = pgx.ForEachRow(rows, scanInto, func() error {
		found = true
		if u != nil {
			out[*u] = store.Secret{Password: *p, Hash: *h}
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(ctx, "read secrets", err)
	}
	if !found {
		return nil, fmt.Errorf("%w: the database holds none (run genesis first)", store.ErrNoGenesis)
	}
	return out, nil
}

func (v view) Authority(ctx context.Context) (*pki.CA, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cert, key []byte
	err := v.q.QueryRow(ctx, `SELECT authority_cert, authority_key FROM genesis`).Scan(&cert, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: the database holds no authority (run genesis first)", store.ErrNoGenesis)
	}
	if err != nil {
		return nil, storeErr(ctx, "read authority", err)
	}
	ca, err := pki.LoadCA(cert, key)
	if err != nil {
		return nil, fmt.Errorf("read authority from the database: %w", err)
	}
	return ca, nil
}

func (v view) DeclarationKey(ctx context.Context) (ed25519.PrivateKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var raw []byte
	err := v.q.QueryRow(ctx, `SELECT key FROM declaration_key`).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no declaration key", store.ErrNotFound)
	}
	if err != nil {
		return nil, storeErr(ctx, "read declaration key", err)
	}
	if len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("read declaration key: %d bytes, not an ed25519 private key", len(raw))
	}
	key := ed25519.PrivateKey(raw)
	// The public half is derived again from the seed: a key torn or
	// edited by hand is refused rather than signing declarations nobody
	// can check.
	if !bytes.Equal(ed25519.NewKeyFromSeed(key.Seed()), key) {
		return nil, errors.New("read declaration key: its public half does not match its seed")
	}
	return key, nil
}

func (v view) Credential(ctx context.Context, user string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	var doc []byte
	err := v.q.QueryRow(ctx, `SELECT document FROM credentials WHERE username = $1`, user).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no credential of %s", store.ErrNotFound, user)
	}
	if err != nil {
		return nil, storeErr(ctx, "read credential of "+user, err)
	}
	return doc, nil
}

func (v view) Credentials(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := v.q.Query(ctx, `SELECT username FROM credentials`)
	if err != nil {
		return nil, storeErr(ctx, "list credentials", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, storeErr(ctx, "list credentials", err)
	}
	// Sorted here, as Go compares strings, whatever the database's
	// collation.
	slices.Sort(users)
	if users == nil {
		users = []string{}
	}
	return users, nil
}

func (v view) Status(ctx context.Context) (store.Status, error) {
	if err := ctx.Err(); err != nil {
		return store.Status{}, err
	}
	var doc []byte
	err := v.q.QueryRow(ctx, `SELECT document FROM status`).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Status{Failing: []store.FailingProvision{}}, nil
	}
	if err != nil {
		return store.Status{}, storeErr(ctx, "read status", err)
	}
	var s store.Status
	if err := json.Unmarshal(doc, &s); err != nil {
		return store.Status{}, fmt.Errorf("read status from the database: %w", err)
	}
	return s.Normalised(), nil
}

// pgTx is one Update. Its calls take turns (a pgx transaction is one
// connection, which is not safe for concurrent use), and are refused
// once fn has returned.
type pgTx struct {
	view
	mu      sync.Mutex
	ended   bool
	genesis bool // the genesis row was seen in this transaction
}

var _ store.SubTx = (*pgTx)(nil)

// errTxEnded refuses a Tx used after its Update's fn returned.
var errTxEnded = errors.New("pgstore: the transaction was used after its Update's fn returned")

func (t *pgTx) end() {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
}

// locked runs f as the transaction's one call in progress.
func locked[T any](t *pgTx, f func() (T, error)) (T, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		var zero T
		return zero, errTxEnded
	}
	return f()
}

func (t *pgTx) Secrets(ctx context.Context) (store.Secrets, error) {
	return locked(t, func() (store.Secrets, error) { return t.view.Secrets(ctx) })
}

func (t *pgTx) Authority(ctx context.Context) (*pki.CA, error) {
	return locked(t, func() (*pki.CA, error) { return t.view.Authority(ctx) })
}

func (t *pgTx) DeclarationKey(ctx context.Context) (ed25519.PrivateKey, error) {
	return locked(t, func() (ed25519.PrivateKey, error) { return t.view.DeclarationKey(ctx) })
}

func (t *pgTx) Credential(ctx context.Context, user string) ([]byte, error) {
	return locked(t, func() ([]byte, error) { return t.view.Credential(ctx, user) })
}

func (t *pgTx) Credentials(ctx context.Context) ([]string, error) {
	return locked(t, func() ([]string, error) { return t.view.Credentials(ctx) })
}

func (t *pgTx) Status(ctx context.Context) (store.Status, error) {
	return locked(t, func() (store.Status, error) { return t.view.Status(ctx) })
}

// write runs one statement of the Update, once the database is seen to
// hold a genesis.
func (t *pgTx) write(ctx context.Context, what string, sql string, args ...any) error {
	_, err := locked(t, func() (struct{}, error) {
		if err := ctx.Err(); err != nil {
			return struct{}{}, err
		}
		if err := t.needGenesis(ctx); err != nil {
			return struct{}{}, err
		}
		if _, err := t.q.Exec(ctx, sql, args...); err != nil {
			return struct{}{}, storeErr(ctx, what, err)
		}
		return struct{}{}, nil
	})
	return err
}

func (t *pgTx) needGenesis(ctx context.Context) error {
	if t.genesis {
		return nil
	}
	var ok bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM genesis)`).Scan(&ok); err != nil {
		return storeErr(ctx, "look for the genesis", err)
	}
	if !ok {
		return fmt.Errorf("%w: the database holds none (run genesis first)", store.ErrNoGenesis)
	}
	t.genesis = true
	return nil
}

func (t *pgTx) PutSecrets(ctx context.Context, s store.Secrets) error {
	for u := range s {
		if err := checkUser(u); err != nil {
			return fmt.Errorf("put secrets: %w", err)
		}
	}
	// Only what differs is written: an enrolment changes two secrets of
	// thousands, and rewriting them all made a fleet's enrolment grow as
	// N² (docs/living-mesh.md, "Scale").
	held, err := t.Secrets(ctx)
	if err != nil {
		return err
	}
	var gone []string
	for u := range held {
		if _, ok := s[u]; !ok {
			gone = append(gone, u)
		}
	}
	changed := store.Secrets{}
	for u, sec := range s {
		if was, ok := held[u]; !ok || was != sec {
			changed[u] = sec
		}
	}
	if len(gone) > 0 {
		if err := t.write(ctx, "put secrets", `DELETE FROM secrets WHERE username = ANY($1)`, gone); err != nil {
			return err
		}
	}
	if len(changed) == 0 {
		return nil
	}
	_, err = locked(t, func() (struct{}, error) {
		return struct{}{}, storeErr(ctx, "put secrets", upsertSecrets(ctx, t.q, changed))
	})
	return err
}

// upsertSecrets writes s in one statement, replacing what is held of its
// users.
func upsertSecrets(ctx context.Context, q querier, s store.Secrets) error {
	users, pws, hashes := make([]string, 0, len(s)), make([]string, 0, len(s)), make([]string, 0, len(s))
	for u, sec := range s {
		users, pws, hashes = append(users, u), append(pws, sec.Password), append(hashes, sec.Hash)
	}
	_, err := q.Exec(ctx, `INSERT INTO secrets (username, password, hash) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
		ON CONFLICT (username) DO UPDATE SET password = excluded.password, hash = excluded.hash`, users, pws, hashes)
	return err
}

func (t *pgTx) PutDeclarationKey(ctx context.Context, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return errors.New("put declaration key: not an ed25519 private key")
	}
	return t.write(ctx, "put declaration key",
		`INSERT INTO declaration_key (key) VALUES ($1) ON CONFLICT (one) DO UPDATE SET key = excluded.key`, slices.Clone([]byte(key)))
}

func (t *pgTx) PutCredential(ctx context.Context, user string, doc []byte) error {
	if err := checkUser(user); err != nil {
		return err
	}
	if len(doc) == 0 {
		return fmt.Errorf("put credential of %s: empty document", user)
	}
	return t.write(ctx, "put credential of "+user,
		`INSERT INTO credentials (username, document) VALUES ($1, $2) ON CONFLICT (username) DO UPDATE SET document = excluded.document`, user, doc)
}

// PutCredentials reads what is held for docs' users in one statement and
// writes the documents that differ in one more.
func (t *pgTx) PutCredentials(ctx context.Context, docs map[string][]byte) ([]string, error) {
	users := slices.Sorted(maps.Keys(docs))
	for _, u := range users {
		if err := checkUser(u); err != nil {
			return nil, err
		}
		if len(docs[u]) == 0 {
			return nil, fmt.Errorf("put credential of %s: empty document", u)
		}
	}
	held, err := locked(t, func() (map[string][]byte, error) {
		rows, err := t.q.Query(ctx, `SELECT username, document FROM credentials WHERE username = ANY($1)`, users)
		if err != nil {
			return nil, storeErr(ctx, "read credentials", err)
		}
		out := map[string][]byte{}
		var u string
		var doc []byte
		if _, err := pgx.ForEachRow(rows, []any{&u, &doc}, func() error { out[u] = slices.Clone(doc); return nil }); err != nil {
			return nil, storeErr(ctx, "read credentials", err)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	var changed []string
	var changedDocs [][]byte
	for _, u := range users {
		if !bytes.Equal(held[u], docs[u]) {
			changed, changedDocs = append(changed, u), append(changedDocs, docs[u])
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return changed, t.write(ctx, "put credentials",
		`INSERT INTO credentials (username, document) SELECT * FROM unnest($1::text[], $2::bytea[])
		 ON CONFLICT (username) DO UPDATE SET document = excluded.document`, changed, changedDocs)
}

func (t *pgTx) DeleteCredential(ctx context.Context, user string) error {
	if err := checkUser(user); err != nil {
		return err
	}
	return t.write(ctx, "revoke "+user, `DELETE FROM credentials WHERE username = $1`, user)
}

func (t *pgTx) PutStatus(ctx context.Context, s store.Status) error {
	doc, err := json.Marshal(s.Normalised())
	if err != nil {
		return fmt.Errorf("put status: %w", err)
	}
	return t.write(ctx, "put status",
		`INSERT INTO status (document) VALUES ($1) ON CONFLICT (one) DO UPDATE SET document = excluded.document`, string(doc))
}

func (v view) Tokens(ctx context.Context) ([]store.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := v.q.Query(ctx, `SELECT id, node, issued, expires, spent, grace_ms FROM tokens`)
	if err != nil {
		return nil, storeErr(ctx, "read tokens", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Token, error) {
		var t store.Token
		var spent *time.Time
		var graceMS int64
		if err := r.Scan(&t.ID, &t.Node, &t.Issued, &t.Expires, &spent, &graceMS); err != nil {
			return t, err
		}
		t.Grace = time.Duration(graceMS) * time.Millisecond
		if spent != nil {
			t.Spent = *spent
		}
		return t, nil
	})
	if err != nil {
		return nil, storeErr(ctx, "read tokens", err)
	}
	slices.SortFunc(out, func(a, b store.Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (v view) Nodes(ctx context.Context) ([]store.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := v.q.Query(ctx, `SELECT name, sealing_key, enrolled, token FROM nodes`)
	if err != nil {
		return nil, storeErr(ctx, "read nodes", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Node, error) {
		var n store.Node
		return n, r.Scan(&n.Name, &n.SealingKey, &n.Enrolled, &n.Token)
	})
	if err != nil {
		return nil, storeErr(ctx, "read nodes", err)
	}
	slices.SortFunc(out, func(a, b store.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (v view) Applied(ctx context.Context, key string) (store.Applied, error) {
	if err := ctx.Err(); err != nil {
		return store.Applied{}, err
	}
	a := store.Applied{Key: key}
	var seq int64
	err := v.q.QueryRow(ctx, `SELECT at, seq, outcome FROM ledger WHERE key = $1`, key).Scan(&a.At, &seq, &a.Outcome)
	a.Seq = uint64(seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Applied{}, fmt.Errorf("%w: no message %s in the ledger", store.ErrNotFound, key)
	}
	if err != nil {
		return store.Applied{}, storeErr(ctx, "read the ledger", err)
	}
	return a, nil
}

func (t *pgTx) Tokens(ctx context.Context) ([]store.Token, error) {
	return locked(t, func() ([]store.Token, error) { return t.view.Tokens(ctx) })
}

func (t *pgTx) Nodes(ctx context.Context) ([]store.Node, error) {
	return locked(t, func() ([]store.Node, error) { return t.view.Nodes(ctx) })
}

func (t *pgTx) Applied(ctx context.Context, key string) (store.Applied, error) {
	return locked(t, func() (store.Applied, error) { return t.view.Applied(ctx, key) })
}

func (v view) LedgerLen(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int
	if err := v.q.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&n); err != nil {
		return 0, storeErr(ctx, "count the ledger", err)
	}
	return n, nil
}

func (t *pgTx) LedgerLen(ctx context.Context) (int, error) {
	return locked(t, func() (int, error) { return t.view.LedgerLen(ctx) })
}

// PruneLedger is one DELETE through the ledger_prune index: its cost is
// the entries it removes.
func (t *pgTx) PruneLedger(ctx context.Context, below uint64, before time.Time) (int, error) {
	if below > math.MaxInt64 {
		below = math.MaxInt64
	}
	return locked(t, func() (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := t.needGenesis(ctx); err != nil {
			return 0, err
		}
		tag, err := t.q.Exec(ctx, `DELETE FROM ledger WHERE seq > 0 AND seq < $1 AND at < $2`, int64(below), before)
		if err != nil {
			return 0, storeErr(ctx, "prune the ledger", err)
		}
		return int(tag.RowsAffected()), nil
	})
}

func (t *pgTx) PutToken(ctx context.Context, tok store.Token) error {
	if err := store.CheckToken(tok); err != nil {
		return err
	}
	var spent *time.Time
	if !tok.Spent.IsZero() {
		spent = &tok.Spent
	}
	return t.write(ctx, "put token "+tok.ID,
		`INSERT INTO tokens (id, node, issued, expires, spent, grace_ms) VALUES ($1, $2, $3, $4, $5, $6)
		 ON CONFLICT (id) DO UPDATE SET node = excluded.node, issued = excluded.issued, expires = excluded.expires, spent = excluded.spent, grace_ms = excluded.grace_ms`,
		tok.ID, tok.Node, tok.Issued, tok.Expires, spent, tok.Grace.Milliseconds())
}

func (t *pgTx) PutNode(ctx context.Context, n store.Node) error {
	if err := store.CheckNode(n); err != nil {
		return err
	}
	return t.write(ctx, "put node "+n.Name,
		`INSERT INTO nodes (name, sealing_key, enrolled, token) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (name) DO UPDATE SET sealing_key = excluded.sealing_key, enrolled = excluded.enrolled, token = excluded.token`,
		n.Name, n.SealingKey, n.Enrolled, n.Token)
}

func (t *pgTx) PutApplied(ctx context.Context, a store.Applied) error {
	if a.Key == "" {
		return errors.New("put applied: no key")
	}
	return t.write(ctx, "enter "+a.Key+" in the ledger",
		`INSERT INTO ledger (key, at, seq, outcome) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET at = excluded.at, seq = excluded.seq, outcome = excluded.outcome`,
		a.Key, a.At, int64(a.Seq), a.Outcome)
}

// documents reads one JSON column of every row of query into a T each.
func documents[T any](ctx context.Context, q querier, what, query string) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, storeErr(ctx, what, err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, storeErr(ctx, what, err)
	}
	out := make([]T, 0, len(docs))
	for _, d := range docs {
		var v T
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (v view) Declared(ctx context.Context) ([]wire.Declaration, error) {
	return documents[wire.Declaration](ctx, v.q, "read declarations", `SELECT document FROM declarations ORDER BY node COLLATE "C"`)
}

func (v view) Reports(ctx context.Context) ([]store.Reported, error) {
	return documents[store.Reported](ctx, v.q, "read reports", `SELECT document FROM reports ORDER BY node COLLATE "C"`)
}

func (v view) Description(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var yaml []byte
	err := v.q.QueryRow(ctx, `SELECT yaml FROM description`).Scan(&yaml)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: nothing was pushed", store.ErrNotFound)
	}
	if err != nil {
		return nil, storeErr(ctx, "read description", err)
	}
	return yaml, nil
}

func (t *pgTx) Declared(ctx context.Context) ([]wire.Declaration, error) {
	return locked(t, func() ([]wire.Declaration, error) { return t.view.Declared(ctx) })
}

func (t *pgTx) Reports(ctx context.Context) ([]store.Reported, error) {
	return locked(t, func() ([]store.Reported, error) { return t.view.Reports(ctx) })
}

func (t *pgTx) Description(ctx context.Context) ([]byte, error) {
	return locked(t, func() ([]byte, error) { return t.view.Description(ctx) })
}

func (t *pgTx) PutDeclared(ctx context.Context, d wire.Declaration) error {
	if err := store.CheckDeclared(d); err != nil {
		return err
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("put declaration: %w", err)
	}
	return t.write(ctx, "put declaration of "+d.Node,
		`INSERT INTO declarations (node, revision, document) VALUES ($1, $2, $3)
		 ON CONFLICT (node) DO UPDATE SET revision = excluded.revision, document = excluded.document`,
		d.Node, int64(d.Revision), string(doc))
}

func (t *pgTx) DeleteDeclared(ctx context.Context, node string) error {
	return t.write(ctx, "forget the declaration of "+node, `DELETE FROM declarations WHERE node = $1`, node)
}

func (t *pgTx) PutDescription(ctx context.Context, yaml []byte) error {
	if len(yaml) == 0 {
		return errors.New("put description: empty")
	}
	return t.write(ctx, "put description",
		`INSERT INTO description (yaml) VALUES ($1) ON CONFLICT (one) DO UPDATE SET yaml = excluded.yaml`, yaml)
}

func (t *pgTx) PutReport(ctx context.Context, r store.Reported) error {
	if err := store.CheckReported(r); err != nil {
		return err
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put report: %w", err)
	}
	return t.write(ctx, "put report of "+r.Report.Node,
		`INSERT INTO reports (node, document) VALUES ($1, $2) ON CONFLICT (node) DO UPDATE SET document = excluded.document`,
		r.Report.Node, string(doc))
}

func (v view) Liveness(ctx context.Context) (store.Liveness, error) {
	l, err := documents[store.Liveness](ctx, v.q, "read liveness", `SELECT document FROM liveness`)
	if err != nil || len(l) == 0 {
		return store.Liveness{}, err
	}
	return l[0], nil
}

func (t *pgTx) Liveness(ctx context.Context) (store.Liveness, error) {
	return locked(t, func() (store.Liveness, error) { return t.view.Liveness(ctx) })
}

func (t *pgTx) PutLiveness(ctx context.Context, l store.Liveness) error {
	doc, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("put liveness: %w", err)
	}
	return t.write(ctx, "put liveness",
		`INSERT INTO liveness (document) VALUES ($1) ON CONFLICT (one) DO UPDATE SET document = excluded.document`, string(doc))
}

func (v view) Builds(ctx context.Context) ([]store.Build, error) {
	return documents[store.Build](ctx, v.q, "read builds", `SELECT document FROM builds ORDER BY id COLLATE "C"`)
}

func (t *pgTx) Builds(ctx context.Context) ([]store.Build, error) {
	return locked(t, func() ([]store.Build, error) { return t.view.Builds(ctx) })
}

func (t *pgTx) PutBuild(ctx context.Context, b store.Build) error {
	if err := store.CheckBuild(b); err != nil {
		return err
	}
	doc, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("put build: %w", err)
	}
	return t.write(ctx, "put build "+b.ID,
		`INSERT INTO builds (id, document) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET document = excluded.document`,
		b.ID, string(doc))
}

func (v view) Persons(ctx context.Context) ([]store.Person, error) {
	return documents[store.Person](ctx, v.q, "read persons", `SELECT document FROM persons ORDER BY name`)
}

func (t *pgTx) Persons(ctx context.Context) ([]store.Person, error) {
	return locked(t, func() ([]store.Person, error) { return t.view.Persons(ctx) })
}

func (t *pgTx) PutPerson(ctx context.Context, p store.Person) error {
	if err := store.CheckPerson(p); err != nil {
		return err
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("put person: %w", err)
	}
	return t.write(ctx, "put person "+p.Name,
		`INSERT INTO persons (name, document) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET document = excluded.document`,
		p.Name, string(doc))
}

func (v view) Compat(ctx context.Context) (store.Compat, error) {
	c, err := documents[store.Compat](ctx, v.q, "read compat", `SELECT document FROM compat`)
	if err != nil {
		return store.Compat{}, err
	}
	if len(c) == 0 {
		return store.Compat{}, fmt.Errorf("%w: the compatibility broker was never checked", store.ErrNotFound)
	}
	return c[0], nil
}

func (t *pgTx) Compat(ctx context.Context) (store.Compat, error) {
	return locked(t, func() (store.Compat, error) { return t.view.Compat(ctx) })
}

func (t *pgTx) PutCompat(ctx context.Context, c store.Compat) error {
	if err := store.CheckCompat(c); err != nil {
		return err
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put compat: %w", err)
	}
	return t.write(ctx, "put compat",
		`INSERT INTO compat (document) VALUES ($1) ON CONFLICT (one) DO UPDATE SET document = excluded.document`, string(doc))
}

func (v view) Cutover(ctx context.Context) (store.Cutover, error) {
	c, err := documents[store.Cutover](ctx, v.q, "read cutover", `SELECT document FROM cutover`)
	if err != nil {
		return store.Cutover{}, err
	}
	if len(c) == 0 {
		return store.Cutover{}, fmt.Errorf("%w: no cutover was begun", store.ErrNotFound)
	}
	return c[0], nil
}

func (t *pgTx) Cutover(ctx context.Context) (store.Cutover, error) {
	return locked(t, func() (store.Cutover, error) { return t.view.Cutover(ctx) })
}

func (t *pgTx) PutCutover(ctx context.Context, c store.Cutover) error {
	if err := store.CheckCutover(c); err != nil {
		return err
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put cutover: %w", err)
	}
	return t.write(ctx, "put cutover",
		`INSERT INTO cutover (document) VALUES ($1) ON CONFLICT (one) DO UPDATE SET document = excluded.document`, string(doc))
}

func (v view) Seats(ctx context.Context) ([]store.Seat, error) {
	return documents[store.Seat](ctx, v.q, "read seats", `SELECT document FROM seats ORDER BY name`)
}

func (t *pgTx) Seats(ctx context.Context) ([]store.Seat, error) {
	return locked(t, func() ([]store.Seat, error) { return t.view.Seats(ctx) })
}

func (t *pgTx) PutSeat(ctx context.Context, st store.Seat) error {
	if err := store.CheckSeat(st); err != nil {
		return err
	}
	doc, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("put seat: %w", err)
	}
	return t.write(ctx, "put seat "+st.Name,
		`INSERT INTO seats (name, document) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET document = excluded.document`,
		st.Name, string(doc))
}

func (t *pgTx) DeletePerson(ctx context.Context, name string) error {
	return t.write(ctx, "forget person "+name, `DELETE FROM persons WHERE name = $1`, name)
}

func (v view) DeadLetters(ctx context.Context) ([]store.DeadLetter, error) {
	ds, err := documents[store.DeadLetter](ctx, v.q, "read dead letters", `SELECT document FROM dead_letters`)
	store.SortDeadLetters(ds)
	return ds, err
}

func (t *pgTx) DeadLetters(ctx context.Context) ([]store.DeadLetter, error) {
	return locked(t, func() ([]store.DeadLetter, error) { return t.view.DeadLetters(ctx) })
}

func (t *pgTx) PutDeadLetter(ctx context.Context, d store.DeadLetter) error {
	if err := store.CheckDeadLetter(d); err != nil {
		return err
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("put dead letter: %w", err)
	}
	return t.write(ctx, "put dead letter",
		`INSERT INTO dead_letters (key, dead_seq, document) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET dead_seq = excluded.dead_seq, document = excluded.document`,
		d.Key(), int64(d.DeadSeq), string(doc))
}

func (v view) Refusals(ctx context.Context) (store.Refusals, error) {
	r, err := documents[store.Refusals](ctx, v.q, "read refusals", `SELECT document FROM refusals`)
	if err != nil || len(r) == 0 {
		return store.Refusals{}.Normalised(), err
	}
	return r[0].Normalised(), nil
}

func (t *pgTx) Refusals(ctx context.Context) (store.Refusals, error) {
	return locked(t, func() (store.Refusals, error) { return t.view.Refusals(ctx) })
}

func (t *pgTx) PutRefusals(ctx context.Context, r store.Refusals) error {
	if err := store.CheckRefusals(r); err != nil {
		return err
	}
	doc, err := json.Marshal(r.Normalised())
	if err != nil {
		return fmt.Errorf("put refusals: %w", err)
	}
	return t.write(ctx, "put refusals",
		`INSERT INTO refusals (document) VALUES ($1) ON CONFLICT (one) DO UPDATE SET document = excluded.document`, string(doc))
}

// Sub is a savepoint: fn's writes are rolled back to it when fn fails,
// the transaction going on.
func (t *pgTx) Sub(ctx context.Context, fn func() error) error {
	if _, err := locked(t, func() (struct{}, error) {
		_, err := t.q.Exec(ctx, "SAVEPOINT sub")
		return struct{}{}, err
	}); err != nil {
		return storeErr(ctx, "begin a part of the update", err)
	}
	ferr := fn()
	end := "RELEASE SAVEPOINT sub"
	if ferr != nil {
		end = "ROLLBACK TO SAVEPOINT sub"
	}
	if _, err := locked(t, func() (struct{}, error) {
		_, err := t.q.Exec(ctx, end)
		return struct{}{}, err
	}); err != nil {
		return errors.Join(ferr, storeErr(ctx, "end a part of the update", err))
	}
	return ferr
}
