package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// FileStore is the store kept in the state directory dir as statedir.Layout spells
// it: secrets.json (whose presence marks a completed genesis), tls/ (the
// authority and the declaration key), credentials/<user>.json and
// status.json, beside the nats/ the nats container reads.
//
// Each write replaces its file through a temporary file, an fsync and a
// rename, then fsyncs the directory, so that a reader (a module reading its
// credential, `mesh-controller status`) sees the old content or the new,
// and the new survives a crash; content unchanged is not rewritten. An
// Update's writes are held until fn returns and then made in the order fn
// made them: a crash mid-commit leaves the first of them done, so an update
// of several files is ordered to be finished by running it again (rollout.Apply).
// The registry (tokens, nodes, the ledger, …) is the exception: an
// update's registry writes are one line appended to registry.journal
// (fileregistry.go), where the last of them was made. Create is all or
// nothing.
//
// A state directory that is missing, or whose secrets.json is missing or
// cannot be read, holds no genesis (ErrNoGenesis): never unavailable. The
// store is unavailable (ErrStoreUnavailable) when the file system fails
// under it: an I/O error, no space or quota left, a file system gone
// read-only, a network file system gone (EIO, ENOSPC, EDQUOT, EROFS,
// ESTALE, ENOTCONN, ETIMEDOUT).
//
// Updates within one process run one at a time. Like the state directory
// before it, the store does not lock the directory against another
// process: run one apply at a time.
func FileStore(dir string) Store { return newFileStore(dir) }

// FileStoreSyncedBy is FileStore fsyncing its directories through sync:
// how a test of a layer above sees what the store makes durable, and
// when, among the composition's own writes.
func FileStoreSyncedBy(dir string, sync func(dir string) error) Store {
	s := newFileStore(dir)
	s.sync = sync
	return s
}

// fileStore is FileStore; its fields are what a test replaces.
type fileStore struct {
	fileView
	reg  *regCache                         // the registry in memory (fileregistry.go)
	sem  chan struct{}                     // held by one Update or Create at a time
	sync func(dir string) error            // fsyncs a directory
	read func(path string) ([]byte, error) // reads a file
}

func newFileStore(dir string) *fileStore {
	s := &fileStore{sem: make(chan struct{}, 1), sync: atomicfile.SyncDir, read: os.ReadFile}
	s.reg = &regCache{l: statedir.Layout{Dir: dir}}
	s.fileView = fileView{l: statedir.Layout{Dir: dir}, readFile: s.readDisk, users: s.credentialUsers,
		reg: func(f func(regView)) error { return s.reg.view(nil, true, f) }}
	return s
}

// unavailableErrnos are the errors of a file system that cannot take a
// call now, though the call was not wrong: waiting, or a person freeing
// space or remounting, helps.
var unavailableErrnos = []syscall.Errno{
	syscall.EIO, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS,
	syscall.ESTALE, syscall.ENOTCONN, syscall.ETIMEDOUT,
}

// fileErr wraps ErrStoreUnavailable around an error of the file system
// failing; any other error, and nil, it returns as it is.
func fileErr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && slices.Contains(unavailableErrnos, errno) {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return err
}

// absent reports whether err says a file or directory is not there.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (s *fileStore) readDisk(path string) ([]byte, error) {
	data, err := s.read(path)
	return data, fileErr(err)
}

// credentialUsers lists the users with a credential file on disk.
func (s *fileStore) credentialUsers() ([]string, error) {
	entries, err := os.ReadDir(s.l.Credentials())
	if absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", fileErr(err))
	}
	var users []string
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(name, statedir.CredentialExt) && !strings.HasPrefix(name, ".") {
			users = append(users, strings.TrimSuffix(name, statedir.CredentialExt))
		}
	}
	return users, nil
}

// lock takes the store for one Update: within the process, and against
// other processes through the state directory's lock file.
func (s *fileStore) lock(ctx context.Context) (unlock func(), err error) {
	release, err := s.take(ctx)
	if err != nil {
		return nil, err
	}
	f, ok, err := Lock(ctx, s.l.Lock())
	if err != nil {
		release()
		return nil, err
	}
	return func() {
		if ok {
			f.Close() // releases the flock
		}
		release()
	}, nil
}

// take takes the store within the process, or gives up when ctx ends
// first.
func (s *fileStore) take(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Update holds fn's writes and makes them once it returns nil.
func (s *fileStore) Update(ctx context.Context, fn func(Tx) error) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// The registry as the files hold it, read under the lock: what the
	// update reads is what every update before it committed.
	if err := s.reg.view(nil, true, func(regView) {}); err != nil {
		return err
	}
	tx := &fileTx{s: s}
	tx.fileView = fileView{l: s.l, readFile: tx.readFile, users: tx.credentialUsers,
		reg: func(f func(regView)) error { return s.reg.view(tx.reg, false, f) }}
	if err := fn(tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return tx.commit()
}

// Create builds the genesis in a temporary directory inside the state
// directory and moves it into place, secrets.json last.
func (s *fileStore) Create(ctx context.Context, st State) error {
	release, err := s.take(ctx)
	if err != nil {
		return err
	}
	defer release()
	keyPEM, err := st.check()
	if err != nil {
		return err
	}
	if err := s.checkEmpty(); err != nil {
		return err
	}
	dir := s.l.Dir
	if err := statedir.MakeDir(dir, s.sync); err != nil {
		return fileErr(err)
	}
	// Locked against another process now that the directory is there, and
	// checked again under the lock.
	f, ok, err := Lock(ctx, s.l.Lock())
	if err != nil {
		return err
	}
	if ok {
		defer f.Close()
	}
	if err := s.checkEmpty(); err != nil {
		return err
	}
	if err := statedir.RemoveGenesisLeftovers(dir); err != nil {
		return fileErr(err)
	}
	tmp, err := os.MkdirTemp(dir, statedir.GenesisTemp)
	if err != nil {
		return fmt.Errorf("write genesis: %w", fileErr(err))
	}
	defer os.RemoveAll(tmp)
	t := statedir.Layout{Dir: tmp}
	for _, d := range []string{t.TLS(), t.Credentials()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("write genesis: %w", fileErr(err))
		}
	}
	files := []fileOp{
		{path: t.CACert(), data: st.Authority.CertPEM, perm: 0o644},
		{path: t.CAKey(), data: st.Authority.KeyPEM, perm: 0o600},
		{path: t.DeclarationKey(), data: keyPEM, perm: 0o600},
	}
	for _, u := range slices.Sorted(maps.Keys(st.Credentials)) {
		files = append(files, fileOp{path: t.Credential(u), data: st.Credentials[u], perm: 0o600})
	}
	files = append(files, fileOp{path: t.Secrets(), data: st.Secrets.marshal(), perm: 0o600})
	for _, f := range files {
		if err := statedir.WriteSynced(f.path, f.data, f.perm); err != nil {
			return fmt.Errorf("write genesis: %w", fileErr(err))
		}
	}
	// The files are fsynced; their directories' entries are made durable
	// too before anything is moved, and every move before secrets.json's,
	// so that after a crash secrets.json present still means a completed
	// genesis.
	for _, d := range []string{t.TLS(), t.Credentials()} {
		if err := s.sync(d); err != nil {
			return fmt.Errorf("write genesis: %w", fileErr(err))
		}
	}
	for _, mv := range [][2]string{{t.TLS(), s.l.TLS()}, {t.Credentials(), s.l.Credentials()}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			return fmt.Errorf("move genesis into place: %w", fileErr(err))
		}
	}
	if err := s.sync(dir); err != nil {
		return fmt.Errorf("move genesis into place: %w", fileErr(err))
	}
	// secrets.json last: it is what marks a completed genesis.
	if err := os.Rename(t.Secrets(), s.l.Secrets()); err != nil {
		return fmt.Errorf("move genesis into place: %w", fileErr(err))
	}
	if err := s.sync(dir); err != nil {
		return fmt.Errorf("move genesis into place: %w", fileErr(err))
	}
	return nil
}

// checkEmpty refuses a directory holding a genesis, or the leftovers of
// one, so that a genesis never overwrites secrets already issued.
func (s *fileStore) checkEmpty() error {
	if _, err := os.Stat(s.l.Secrets()); err == nil {
		return fmt.Errorf("%w: %s exists; use apply to change an existing mesh", ErrGenesisExists, s.l.Secrets())
	} else if !absent(err) {
		return fmt.Errorf("inspect state directory: %w", fileErr(err))
	}
	for _, p := range []string{s.l.TLS(), s.l.Credentials()} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s exists without %s (the leftovers of an interrupted genesis?); remove it or use another directory",
				ErrGenesisExists, p, statedir.SecretsFile)
		} else if !absent(err) {
			return fmt.Errorf("inspect state directory: %w", fileErr(err))
		}
	}
	return nil
}

// check refuses a state with a part missing, and encodes the declaration
// key.
func (st State) check() (keyPEM []byte, err error) {
	if st.Authority == nil || len(st.Authority.CertPEM) == 0 || len(st.Authority.KeyPEM) == 0 {
		return nil, errors.New("genesis: no authority")
	}
	if len(st.DeclarationKey) != ed25519.PrivateKeySize {
		return nil, errors.New("genesis: no declaration key")
	}
	for u, doc := range st.Credentials {
		if err := checkUser(u); err != nil {
			return nil, fmt.Errorf("genesis: %w", err)
		}
		if len(doc) == 0 {
			return nil, fmt.Errorf("genesis: credential of %s: empty document", u)
		}
	}
	return encodeDeclarationKey(st.DeclarationKey)
}

// checkUser refuses a user name that is not one file's name in
// credentials/.
func checkUser(user string) error {
	if user == "" || user != filepath.Base(user) || strings.HasPrefix(user, ".") || strings.ContainsAny(user, `/\`+"\x00") {
		return fmt.Errorf("credential: %q is not a user name", user)
	}
	return nil
}

// fileView reads the state through readFile and users: from the disk for
// the store, through an update's writes held so far for a transaction.
type fileView struct {
	l        statedir.Layout
	readFile func(path string) ([]byte, error) // errors already through fileErr
	users    func() ([]string, error)
	reg      func(f func(regView)) error // runs f on the registry as seen
}

func (v fileView) Secrets(ctx context.Context) (Secrets, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := v.l.Secrets()
	data, err := v.readFile(path)
	switch {
	case absent(err):
		return nil, fmt.Errorf("%w: %s is missing (run genesis first)", ErrNoGenesis, path)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w: %w", ErrNoGenesis, err)
	case err != nil:
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	var s Secrets
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read secrets %s: %w", path, err)
	}
	if s == nil {
		s = Secrets{}
	}
	return s, nil
}

func (v fileView) Authority(ctx context.Context) (*pki.CA, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var pems [2][]byte
	for i, path := range []string{v.l.CACert(), v.l.CAKey()} {
		data, err := v.readFile(path)
		if absent(err) {
			return nil, fmt.Errorf("%w: %s is missing", ErrNoGenesis, path)
		}
		if err != nil {
			return nil, fmt.Errorf("read authority: %w", err)
		}
		pems[i] = data
	}
	ca, err := pki.LoadCA(pems[0], pems[1])
	if err != nil {
		return nil, fmt.Errorf("read authority %s: %w", v.l.TLS(), err)
	}
	return ca, nil
}

func (v fileView) DeclarationKey(ctx context.Context) (ed25519.PrivateKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := v.l.DeclarationKey()
	data, err := v.readFile(path)
	if absent(err) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNotFound, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read declaration key: %w", err)
	}
	return parseDeclarationKey(data, path)
}

func (v fileView) Credential(ctx context.Context, user string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	data, err := v.readFile(v.l.Credential(user))
	if absent(err) {
		return nil, fmt.Errorf("%w: no credential of %s", ErrNotFound, user)
	}
	if err != nil {
		return nil, fmt.Errorf("read credential of %s: %w", user, err)
	}
	return data, nil
}

func (v fileView) Credentials(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	users, err := v.users()
	if err != nil {
		return nil, err
	}
	slices.Sort(users)
	return users, nil
}

func (v fileView) Status(ctx context.Context) (Status, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, err
	}
	path := v.l.Status()
	data, err := v.readFile(path)
	if absent(err) {
		return Status{Failing: []FailingProvision{}}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("read status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		// Removing it loses nothing for long: a provider says again every
		// fifteen minutes what it keeps failing.
		return Status{}, fmt.Errorf("read status %s: %w (remove the file to start from an empty status; providers repeat their failing words within fifteen minutes)", path, err)
	}
	return s.Normalised(), nil
}

// fileTx is one Update: its writes, held until the commit.
type fileTx struct {
	fileView
	s       *fileStore
	ops     []fileOp
	reg     []regOp // the registry's writes, one line of the journal
	regAt   int     // how many of ops come before that line
	genesis bool    // secrets.json was seen on disk
}

// fileOp is one write: data replaces the file at path, or, nil, removes
// it. user names the credential a write of credentials/ is of.
type fileOp struct {
	path string
	data []byte
	perm fs.FileMode
	user string
}

// readFile reads path as the update left it so far.
func (tx *fileTx) readFile(path string) ([]byte, error) {
	for i := len(tx.ops) - 1; i >= 0; i-- {
		if op := tx.ops[i]; op.path == path {
			if op.data == nil {
				return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
			}
			return op.data, nil
		}
	}
	return tx.s.readDisk(path)
}

// credentialUsers are the users with a credential once the update is
// committed.
func (tx *fileTx) credentialUsers() ([]string, error) {
	users, err := tx.s.credentialUsers()
	if err != nil {
		return nil, err
	}
	for _, op := range tx.ops {
		if op.user == "" {
			continue
		}
		i := slices.Index(users, op.user)
		switch {
		case op.data == nil && i >= 0:
			users = slices.Delete(users, i, i+1)
		case op.data != nil && i < 0:
			users = append(users, op.user)
		}
	}
	return users, nil
}

// hold adds a write to the update, once the state directory is seen to
// hold a genesis.
func (tx *fileTx) hold(ctx context.Context, op fileOp) error {
	if err := tx.needGenesis(ctx); err != nil {
		return err
	}
	tx.ops = append(tx.ops, op)
	return nil
}

// needGenesis refuses a write to a state directory that holds no
// genesis; it looks once per update.
func (tx *fileTx) needGenesis(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !tx.genesis {
		_, err := os.Stat(tx.l.Secrets())
		switch {
		case absent(err) || errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("%w: %s is missing (run genesis first)", ErrNoGenesis, tx.l.Secrets())
		case err != nil:
			return fmt.Errorf("inspect state directory: %w", fileErr(err))
		}
		tx.genesis = true
	}
	return nil
}

func (tx *fileTx) PutSecrets(ctx context.Context, s Secrets) error {
	if s == nil {
		s = Secrets{}
	}
	return tx.hold(ctx, fileOp{path: tx.l.Secrets(), data: s.marshal(), perm: 0o600})
}

func (tx *fileTx) PutDeclarationKey(ctx context.Context, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return errors.New("put declaration key: not an ed25519 private key")
	}
	data, err := encodeDeclarationKey(key)
	if err != nil {
		return err
	}
	return tx.hold(ctx, fileOp{path: tx.l.DeclarationKey(), data: data, perm: 0o600})
}

func (tx *fileTx) PutCredential(ctx context.Context, user string, doc []byte) error {
	if err := checkUser(user); err != nil {
		return err
	}
	if len(doc) == 0 {
		return fmt.Errorf("put credential of %s: empty document", user)
	}
	return tx.hold(ctx, fileOp{path: tx.l.Credential(user), data: slices.Clone(doc), perm: 0o600, user: user})
}

// PutCredentials puts every document, changed or not: a put is what lets
// the commit clear the leftovers of interrupted writes in credentials/.
func (tx *fileTx) PutCredentials(ctx context.Context, docs map[string][]byte) ([]string, error) {
	var changed []string
	for _, u := range slices.Sorted(maps.Keys(docs)) {
		was, err := tx.Credential(ctx, u)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if !bytes.Equal(was, docs[u]) {
			changed = append(changed, u)
		}
		if err := tx.PutCredential(ctx, u, docs[u]); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

func (tx *fileTx) DeleteCredential(ctx context.Context, user string) error {
	if err := checkUser(user); err != nil {
		return err
	}
	return tx.hold(ctx, fileOp{path: tx.l.Credential(user), user: user})
}

func (tx *fileTx) PutStatus(ctx context.Context, s Status) error {
	if s.Failing == nil {
		s.Failing = []FailingProvision{}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("put status: %w", err)
	}
	return tx.hold(ctx, fileOp{path: tx.l.Status(), data: append(data, '\n'), perm: 0o644})
}

// commit makes the writes in the order they were made. An update that
// touched credentials/ also removes the temporary files interrupted writes
// left there (each holds a credential, and so a password); every directory
// something was removed from is synced last.
func (tx *fileTx) commit() error {
	s := tx.s
	removedIn := map[string]bool{}
	credentials := false
	for i, op := range tx.ops {
		if i == tx.regAt {
			if err := tx.commitRegistry(); err != nil {
				return err
			}
		}
		credentials = credentials || op.user != ""
		if op.data == nil {
			if err := os.Remove(op.path); err != nil && !absent(err) {
				return fmt.Errorf("revoke %s: %w", op.user, fileErr(err))
			}
			removedIn[filepath.Dir(op.path)] = true
			continue
		}
		if _, err := atomicfile.Write(op.path, op.data, op.perm, s.sync); err != nil {
			return fileErr(err)
		}
	}
	if tx.regAt == len(tx.ops) {
		if err := tx.commitRegistry(); err != nil {
			return err
		}
	}
	if credentials {
		dir := s.l.Credentials()
		entries, err := os.ReadDir(dir)
		if err != nil && !absent(err) {
			return fmt.Errorf("list credentials: %w", fileErr(err))
		}
		for _, e := range entries {
			if name := e.Name(); e.Type().IsRegular() && strings.HasPrefix(name, ".") && strings.Contains(name, atomicfile.TempInfix) {
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !absent(err) {
					return fmt.Errorf("remove the leftover of an interrupted write: %w", fileErr(err))
				}
				removedIn[dir] = true
			}
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(removedIn)) {
		if err := s.sync(dir); err != nil {
			return fmt.Errorf("revoke: %w", fileErr(err))
		}
	}
	return nil
}

// The registry's records, through the registry's cache (fileregistry.go):
// read from the files as they are for the store, with the update's
// writes so far on top for a transaction.

// regRead runs f on the registry as this view sees it.
func (v fileView) regRead(ctx context.Context, f func(regView)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return v.reg(f)
}

func (v fileView) Tokens(ctx context.Context) (out []Token, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.tokens() })
}

func (v fileView) Builds(ctx context.Context) (out []Build, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.builds() })
}

func (v fileView) Compat(ctx context.Context) (Compat, error) {
	var c Compat
	ok := false
	if err := v.regRead(ctx, func(r regView) { c, ok = r.compatRecord() }); err != nil {
		return Compat{}, err
	}
	if !ok {
		return Compat{}, fmt.Errorf("%w: the compatibility broker was never checked", ErrNotFound)
	}
	return c, nil
}

func (v fileView) Cutover(ctx context.Context) (Cutover, error) {
	var c Cutover
	ok := false
	if err := v.regRead(ctx, func(r regView) { c, ok = r.cutoverRecord() }); err != nil {
		return Cutover{}, err
	}
	if !ok {
		return Cutover{}, fmt.Errorf("%w: no cutover was begun", ErrNotFound)
	}
	return c, nil
}

func (v fileView) Seats(ctx context.Context) (out []Seat, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.seats() })
}

func (v fileView) Persons(ctx context.Context) (out []Person, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.persons() })
}

func (v fileView) Nodes(ctx context.Context) (out []Node, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.nodes() })
}

func (v fileView) Applied(ctx context.Context, key string) (Applied, error) {
	var a Applied
	ok := false
	if err := v.regRead(ctx, func(r regView) { a, ok = r.applied(key) }); err != nil {
		return Applied{}, err
	}
	if !ok {
		return Applied{}, fmt.Errorf("%w: no message %s in the ledger", ErrNotFound, key)
	}
	return a, nil
}

func (v fileView) LedgerLen(ctx context.Context) (n int, err error) {
	return n, v.regRead(ctx, func(r regView) { n = r.ledgerLen() })
}

func (v fileView) Declared(ctx context.Context) (out []wire.Declaration, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.declared() })
}

func (v fileView) Description(ctx context.Context) ([]byte, error) {
	var d []byte
	if err := v.regRead(ctx, func(r regView) { d = r.description() }); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("%w: nothing was pushed", ErrNotFound)
	}
	return slices.Clone(d), nil
}

func (v fileView) Reports(ctx context.Context) (out []Reported, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.reports() })
}

func (v fileView) Liveness(ctx context.Context) (out Liveness, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.livenessRecord() })
}

func (v fileView) DeadLetters(ctx context.Context) (out []DeadLetter, err error) {
	return out, v.regRead(ctx, func(r regView) { out = r.dead() })
}

func (v fileView) Refusals(ctx context.Context) (out Refusals, err error) {
	err = v.regRead(ctx, func(r regView) { out = r.refusalsRecord() })
	return out.Normalised(), err
}

// putReg holds one registry write of the update, once the state
// directory is seen to hold a genesis; the commit makes all of them one
// line of the journal, where the last of them was made.
func (tx *fileTx) putReg(ctx context.Context, op regOp) error {
	if err := tx.needGenesis(ctx); err != nil {
		return err
	}
	tx.reg = append(tx.reg, copyOp(op))
	tx.regAt = len(tx.ops)
	return nil
}

func (tx *fileTx) PutBuild(ctx context.Context, b Build) error {
	if err := CheckBuild(b); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Build: &b})
}

func (tx *fileTx) PutPerson(ctx context.Context, p Person) error {
	if err := CheckPerson(p); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Person: &p})
}

func (tx *fileTx) PutCompat(ctx context.Context, c Compat) error {
	if err := CheckCompat(c); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Compat: &c})
}

func (tx *fileTx) PutCutover(ctx context.Context, c Cutover) error {
	if err := CheckCutover(c); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Cutover: &c})
}

func (tx *fileTx) PutSeat(ctx context.Context, s Seat) error {
	if err := CheckSeat(s); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Seat: &s})
}

func (tx *fileTx) DeletePerson(ctx context.Context, name string) error {
	return tx.putReg(ctx, regOp{Unperson: name})
}

func (tx *fileTx) PutToken(ctx context.Context, t Token) error {
	if err := CheckToken(t); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Token: &t})
}

func (tx *fileTx) PutNode(ctx context.Context, n Node) error {
	if err := CheckNode(n); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Node: &n})
}

func (tx *fileTx) PutApplied(ctx context.Context, a Applied) error {
	if a.Key == "" {
		return errors.New("put applied: no key")
	}
	a.Outcome = slices.Clone(a.Outcome)
	return tx.putReg(ctx, regOp{Applied: &a})
}

func (tx *fileTx) PruneLedger(ctx context.Context, below uint64, before time.Time) (int, error) {
	var keys []string
	if err := tx.regRead(ctx, func(r regView) { keys = r.prunable(below, before) }); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, nil
	}
	return len(keys), tx.putReg(ctx, regOp{Forget: keys})
}

func (tx *fileTx) PutDeclared(ctx context.Context, d wire.Declaration) error {
	if err := CheckDeclared(d); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Declared: &d})
}

func (tx *fileTx) DeleteDeclared(ctx context.Context, node string) error {
	return tx.putReg(ctx, regOp{Undeclared: node})
}

func (tx *fileTx) PutDescription(ctx context.Context, yaml []byte) error {
	if len(yaml) == 0 {
		return errors.New("put description: empty")
	}
	return tx.putReg(ctx, regOp{Description: slices.Clone(yaml)})
}

func (tx *fileTx) PutReport(ctx context.Context, rep Reported) error {
	if err := CheckReported(rep); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Report: &rep})
}

func (tx *fileTx) PutLiveness(ctx context.Context, l Liveness) error {
	return tx.putReg(ctx, regOp{Liveness: &l})
}

func (tx *fileTx) PutDeadLetter(ctx context.Context, d DeadLetter) error {
	if err := CheckDeadLetter(d); err != nil {
		return err
	}
	return tx.putReg(ctx, regOp{Dead: &d})
}

func (tx *fileTx) PutRefusals(ctx context.Context, x Refusals) error {
	if err := CheckRefusals(x); err != nil {
		return err
	}
	x = x.Normalised()
	return tx.putReg(ctx, regOp{Refusals: &x})
}

// commitRegistry appends the update's registry writes to the journal, one
// line, where the last of them was made among its other writes: what an
// entry of the ledger says is applied is on disk before the entry. Then
// it folds the journal into registry.json when it has grown enough.
func (tx *fileTx) commitRegistry() error {
	if len(tx.reg) == 0 {
		return nil
	}
	c := tx.s.reg
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.appendJournal(tx.reg, tx.s.sync); err != nil {
		return err
	}
	// Committed: a fold that fails is tried again after the next update.
	_ = c.compact(tx.s.sync)
	return nil
}

// Sub undoes fn's writes when it fails: they are only held until the
// commit, so undoing is forgetting them.
func (tx *fileTx) Sub(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ops, reg, regAt, genesis := len(tx.ops), len(tx.reg), tx.regAt, tx.genesis
	if err := fn(); err != nil {
		tx.ops, tx.reg, tx.regAt, tx.genesis = tx.ops[:ops], tx.reg[:reg], regAt, genesis
		return err
	}
	return nil
}
