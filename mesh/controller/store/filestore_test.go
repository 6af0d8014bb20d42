package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/wire"
)

// failWith makes every read of path fail with errno, as the file system
// would.
func failWith(s *fileStore, path string, errno syscall.Errno) {
	read := s.read
	s.read = func(p string) ([]byte, error) {
		if p == path {
			return nil, &fs.PathError{Op: "open", Path: p, Err: errno}
		}
		return read(p)
	}
}

// TestWhatMakesAFileStoreUnavailable: the file system failing under the
// store, and only that, is the store unavailable.
func TestWhatMakesAFileStoreUnavailable(t *testing.T) {
	for _, errno := range unavailableErrnos {
		err := fileErr(&fs.PathError{Op: "write", Path: "/state/status.json", Err: errno})
		if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, errno) {
			t.Errorf("%v: expected ErrStoreUnavailable wrapping it, got %v", errno, err)
		}
	}
	for _, e := range []error{
		&fs.PathError{Op: "open", Path: "/state/secrets.json", Err: syscall.ENOENT},
		&fs.PathError{Op: "open", Path: "/state/secrets.json", Err: syscall.EACCES},
		&fs.PathError{Op: "rename", Path: "/state/status.json", Err: syscall.EISDIR},
		errors.New("disk says no"),
	} {
		if err := fileErr(e); errors.Is(err, ErrStoreUnavailable) || err != e {
			t.Errorf("%v: expected it unchanged, got %v", e, err)
		}
	}
	if fileErr(nil) != nil {
		t.Error("fileErr(nil) is not nil")
	}
}

// TestAFileStoreThatCannotReadIsUnavailable: an I/O error under a state
// directory that is there says unavailable, never "no genesis" nor an
// empty status, which a caller would take for the truth.
func TestAFileStoreThatCannotReadIsUnavailable(t *testing.T) {
	s := genesisStore(t)
	ctx := ctxT(t)
	if err := s.Update(ctx, func(tx Tx) error { return tx.PutStatus(ctx, Status{Through: 3}) }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.l.Secrets(), s.l.Status(), s.l.Credential(wire.ControllerUser), s.l.DeclarationKey(), s.l.CAKey()} {
		failWith(s, p, syscall.EIO)
	}
	for what, read := range map[string]func() error{
		"secrets":         func() error { _, err := s.Secrets(ctx); return err },
		"status":          func() error { _, err := s.Status(ctx); return err },
		"credential":      func() error { _, err := s.Credential(ctx, wire.ControllerUser); return err },
		"declaration key": func() error { _, err := s.DeclarationKey(ctx); return err },
		"authority":       func() error { _, err := s.Authority(ctx); return err },
		"status in an update": func() error {
			return s.Update(ctx, func(tx Tx) error { _, err := tx.Status(ctx); return err })
		},
	} {
		err := read()
		if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrNoGenesis) || errors.Is(err, ErrNotFound) {
			t.Errorf("%s under EIO: expected ErrStoreUnavailable alone, got %v", what, err)
		}
	}
}

// TestAFileStoreThatCannotWriteIsUnavailable: a write the disk fails (here
// the fsync of the directory, as on a disk failing) is the store
// unavailable, and the caller is told so.
func TestAFileStoreThatCannotWriteIsUnavailable(t *testing.T) {
	s := genesisStore(t)
	s.sync = func(dir string) error { return &fs.PathError{Op: "sync", Path: dir, Err: syscall.EIO} }
	ctx := ctxT(t)
	err := s.Update(ctx, func(tx Tx) error { return tx.PutStatus(ctx, Status{Through: 1}) })
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("expected ErrStoreUnavailable, got %v", err)
	}
	s.sync = func(dir string) error { return &fs.PathError{Op: "sync", Path: dir, Err: syscall.ENOSPC} }
	err = s.Update(ctx, func(tx Tx) error { return tx.DeleteCredential(ctx, wire.EnrolUser("tok-node-c")) })
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("expected ErrStoreUnavailable wrapping ENOSPC, got %v", err)
	}
}

// TestAMissingOrUnreadableStateDirectoryHoldsNoGenesis: not there, not a
// directory or not readable is no genesis (what genesis is for), never
// the store unavailable (what waiting is for).
func TestAMissingOrUnreadableStateDirectoryHoldsNoGenesis(t *testing.T) {
	ctx := ctxT(t)
	root := t.TempDir()
	notDir := filepath.Join(root, "a-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := genesisStore(t)
	failWith(unreadable, unreadable.l.Secrets(), syscall.EACCES)
	for what, s := range map[string]*fileStore{
		"missing":              newFileStore(filepath.Join(root, "absent")),
		"not a directory":      newFileStore(filepath.Join(notDir, "state")),
		"secrets not readable": unreadable,
	} {
		_, err := s.Secrets(ctx)
		if !errors.Is(err, ErrNoGenesis) || errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("%s: expected ErrNoGenesis, got %v", what, err)
		}
		if what == "secrets not readable" {
			continue
		}
		if st, err := s.Status(ctx); err != nil || st.Through != 0 {
			t.Errorf("%s: expected the empty status, got %+v (%v)", what, st, err)
		}
		err = s.Update(ctx, func(tx Tx) error { return tx.PutStatus(ctx, Status{Through: 1}) })
		if !errors.Is(err, ErrNoGenesis) {
			t.Errorf("%s: a write: expected ErrNoGenesis, got %v", what, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write made the state directory: %v", err)
	}
}

// tree is every file under dir with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAFailedFileUpdateLeavesTheDirectoryAsItWas: nothing of an update
// whose fn fails reaches the disk, not even a temporary file.
func TestAFailedFileUpdateLeavesTheDirectoryAsItWas(t *testing.T) {
	s := genesisStore(t)
	before := tree(t, s.l.Dir)
	ctx := ctxT(t)
	refused := errors.New("refused")
	err := s.Update(ctx, func(tx Tx) error {
		_ = tx.PutSecrets(ctx, Secrets{})
		_ = tx.PutStatus(ctx, Status{Through: 9})
		_ = tx.DeleteCredential(ctx, wire.ControllerUser)
		_ = tx.PutCredential(ctx, wire.PersonUser("carol"), []byte("{}"))
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("expected fn's error, got %v", err)
	}
	if after := tree(t, s.l.Dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("a failed update changed the state directory:\nbefore %d files, after %d", len(before), len(after))
	}
}

// TestAFileStoreRefusesWhatIsNotAUserName: a credential's user is one
// file's name in credentials/, never a path out of it.
func TestAFileStoreRefusesWhatIsNotAUserName(t *testing.T) {
	s := genesisStore(t)
	ctx := ctxT(t)
	for _, u := range []string{"", "../secrets", "a/b", ".hidden", `a\b`} {
		if _, err := s.Credential(ctx, u); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("read %q: expected a refusal, got %v", u, err)
		}
		if err := s.Update(ctx, func(tx Tx) error { return tx.PutCredential(ctx, u, []byte("{}")) }); err == nil {
			t.Errorf("put %q: expected a refusal", u)
		}
	}
	if _, err := s.Secrets(ctx); err != nil {
		t.Fatalf("the secrets after refused puts: %v", err)
	}
}

// TestTheStatusFileRoundTrips: the status file is what a person reads;
// a torn one is named in the error.
func TestTheStatusFileRoundTrips(t *testing.T) {
	s := genesisStore(t)
	ctx := ctxT(t)
	empty, err := s.Status(ctx)
	if err != nil || empty.Through != 0 || empty.Failing == nil || len(empty.Failing) != 0 {
		t.Fatalf("a directory without status: %+v, %v; want the empty status", empty, err)
	}
	st := Status{EventsCreated: since0.Add(-time.Hour)}
	failingWord("pg", "billing", "node-a", wire.ClassUnreachable, said0).applyTo(t, &st, 9)
	if err := s.Update(ctx, func(tx Tx) error { return tx.PutStatus(ctx, st) }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.l.Status()); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("expected a 0644 %s: %v %v", statedir.StatusFile, fi, err)
	}
	got, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, st)
	}
	if err := os.WriteFile(s.l.Status(), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(ctx); err == nil || !strings.Contains(err.Error(), statedir.StatusFile) {
		t.Fatalf("a torn status file: want an error naming it, got %v", err)
	}
}

// TestAFailedCreateLeavesNoGenesis: a create that fails before its renames
// leaves nothing, and a create killed mid-way leaves a temporary directory
// (holding secrets) that the next one removes.
func TestAFailedCreateLeavesNoGenesis(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	state := sampleState(t)
	s := newFileStore(dir)
	s.sync = func(d string) error {
		if filepath.Base(d) == statedir.CredentialsDir {
			return &fs.PathError{Op: "sync", Path: d, Err: syscall.EIO}
		}
		return atomicfile.SyncDir(d)
	}
	ctx := ctxT(t)
	if err := s.Create(ctx, state); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("expected the failed sync as the store unavailable, got %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != statedir.LockFile {
			t.Errorf("a failed create left %s", e.Name())
		}
	}
	killed := filepath.Join(dir, statedir.GenesisTemp+"123")
	if err := os.MkdirAll(killed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(killed, statedir.SecretsFile), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.sync = atomicfile.SyncDir
	if err := s.Create(ctx, state); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the leftovers of a killed create are still there: %v", err)
	}
	if _, err := s.Secrets(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAnUpdateWaitsForAnotherProcess: the lock file keeps an update of
// another handle (another process) waiting, until its context ends.
func TestAnUpdateWaitsForAnotherProcess(t *testing.T) {
	s := genesisStore(t)
	other := newFileStore(s.l.Dir)
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := other.Update(ctx, func(Tx) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected the other handle to wait until its deadline, got %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := other.Update(ctxT(t), func(Tx) error { return nil }); err != nil {
		t.Fatalf("once released: %v", err)
	}
}
