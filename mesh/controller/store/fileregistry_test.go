package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/wire"
)

// writtenBytes is what this process has written through write(2) and its
// kind so far (/proc/self/io's wchar); the test is skipped where there is
// no such file.
func writtenBytes(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no wchar in /proc/self/io")
	return 0
}

// bigLedger writes a registry.json whose ledger holds n entries, as n
// messages applied before would have left it.
func bigLedger(t *testing.T, st *fileStore, n int) {
	t.Helper()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := registry{}
	for i := range n {
		r.Ledger = append(r.Ledger, Applied{Key: LedgerKey(wire.SubjectEnrol, fmt.Sprintf("junk-%d", i), uint64(i+1)), At: at, Outcome: []byte(`{"refused":"the proof is not token tok-0's"}`)})
	}
	if err := os.WriteFile(st.l.Registry(), r.marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAnUpdateCostsWhatItWritesNotTheLedger: with 20 000 entries in the
// ledger, an update entering one message writes a few hundred bytes, not
// the registry again (issue 18: each update rewrote and fsynced the whole
// registry, 2 MB here, and the CONTROL loop slowed as the ledger grew).
func TestAnUpdateCostsWhatItWritesNotTheLedger(t *testing.T) {
	st := genesisStore(t)
	bigLedger(t, st, 20000)
	ctx := ctxT(t)
	if _, err := st.Applied(ctx, LedgerKey(wire.SubjectEnrol, "junk-7", 8)); err != nil {
		t.Fatalf("the ledger as written: %v", err)
	}
	size := func() int64 {
		fi, err := os.Stat(st.l.Registry())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := writtenBytes(t)
	for i := range 10 {
		if err := st.Update(ctx, func(tx Tx) error {
			return tx.PutApplied(ctx, Applied{Key: LedgerKey(wire.SubjectEnrol, fmt.Sprintf("new-%d", i), 0), At: time.Now(), Seq: uint64(30000 + i)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	written := writtenBytes(t) - before
	if written > 64<<10 {
		t.Fatalf("ten updates of one ledger entry each wrote %d bytes, with a registry of %d: an update's cost grows with the ledger", written, size())
	}
	if n, err := st.LedgerLen(ctx); err != nil || n != 20010 {
		t.Fatalf("ledger: %d entries (%v)", n, err)
	}
}

// TestATornJournalTailIsNotAnUpdate: a crash mid-append leaves a tail
// without its newline; it is no update (its commit never returned), a
// new handle reads what was committed, and the next update's line goes
// after the last whole one.
func TestATornJournalTailIsNotAnUpdate(t *testing.T) {
	st := genesisStore(t)
	ctx := ctxT(t)
	put := func(st Store, key string) {
		t.Helper()
		if err := st.Update(ctx, func(tx Tx) error {
			return tx.PutApplied(ctx, Applied{Key: key, At: time.Now(), Seq: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(st, "seq:1")
	f, err := os.OpenFile(st.l.RegistryJournal(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"ops":[{"applied":{"key":"seq:2","at":"2026-12-`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	again := newFileStore(st.l.Dir)
	if _, err := again.Applied(ctx, "seq:1"); err != nil {
		t.Fatalf("the committed entry: %v", err)
	}
	if _, err := again.Applied(ctx, "seq:2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the torn one: expected ErrNotFound, got %v", err)
	}
	put(again, "seq:3")
	third := newFileStore(st.l.Dir)
	for key, want := range map[string]bool{"seq:1": true, "seq:2": false, "seq:3": true} {
		if _, err := third.Applied(ctx, key); (err == nil) != want {
			t.Errorf("%s: expected present %v, got %v", key, want, err)
		}
	}
	data, err := os.ReadFile(st.l.RegistryJournal())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("seq:2")) || !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("the journal still holds the torn tail:\n%s", data)
	}
}

// TestTheJournalIsFoldedIntoTheRegistry: once the journal has grown past
// its bound it is folded into registry.json; a crash between writing
// registry.json and emptying the journal (the old journal replayed over
// the new registry) reads the same registry; and the fold keeps the
// journal's size bounded however many updates come.
func TestTheJournalIsFoldedIntoTheRegistry(t *testing.T) {
	st := genesisStore(t)
	st.reg.compactAt = 4 << 10
	ctx := ctxT(t)
	for i := range 200 {
		if err := st.Update(ctx, func(tx Tx) error {
			return errors.Join(
				tx.PutApplied(ctx, Applied{Key: fmt.Sprintf("seq:%d", i+1), At: time.Now(), Seq: uint64(i + 1)}),
				tx.PutReport(ctx, Reported{Report: wire.Report{Kind: wire.KindReport, Node: "node-a", ID: fmt.Sprint(i)}, Seq: uint64(i + 1)}),
			)
		}); err != nil {
			t.Fatal(err)
		}
		// Folded once as large as registry.json (or the bound): the
		// fold's cost is the journal's, amortised.
		var reg int64
		if fi, err := os.Stat(st.l.Registry()); err == nil {
			reg = fi.Size()
		}
		if fi, err := os.Stat(st.l.RegistryJournal()); err == nil && fi.Size() > max(4<<10, reg)+1<<10 {
			t.Fatalf("after %d updates the journal holds %d bytes, registry.json %d: not folded", i+1, fi.Size(), reg)
		}
	}
	check := func(what string) {
		t.Helper()
		s := newFileStore(st.l.Dir)
		if n, err := s.LedgerLen(ctx); err != nil || n != 200 {
			t.Fatalf("%s: ledger %d (%v)", what, n, err)
		}
		reps, err := s.Reports(ctx)
		if err != nil || len(reps) != 1 || reps[0].Report.ID != "199" {
			t.Fatalf("%s: reports %+v (%v)", what, reps, err)
		}
	}
	if _, err := os.Stat(st.l.Registry()); err != nil {
		t.Fatalf("never folded: %v", err)
	}
	check("folded")
	// A fold killed between its two renames: registry.json holds the
	// journal's lines, and the journal is still there.
	if err := st.reg.view(nil, true, func(r regView) {
		if _, err := atomicfile.Write(st.l.Registry(), r.base.document().marshal(), 0o600, atomicfile.SyncDir); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(st.l.RegistryJournal()); err != nil || fi.Size() == 0 {
		t.Fatalf("no journal to replay over the folded registry (the last update folded it: change the count): %v", err)
	}
	check("an old journal over the new registry")
}

// TestALedgerOfBeforeIsPruned: a registry.json written before entries
// carried their sequence has its messages' entries pruned once old
// enough; a token's answer stays.
func TestALedgerOfBeforeIsPruned(t *testing.T) {
	st := genesisStore(t)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := registry{Ledger: []Applied{
		{Key: LedgerKey(wire.SubjectEnrol, "m1", 5), At: at},
		{Key: LedgerKey(wire.SubjectEnrol, "", 6), At: at},
		{Key: "enrolled:tok-1", At: at, Outcome: []byte(`{}`)}, // a token's answer, as the enrolment keys it
	}}
	if err := os.WriteFile(st.l.Registry(), r.marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	n := 0
	err := st.Update(ctx, func(tx Tx) (err error) {
		n, err = tx.PruneLedger(ctx, 7, at.Add(time.Hour))
		return err
	})
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), expected the two messages' entries", n, err)
	}
	if _, err := newFileStore(st.l.Dir).Applied(ctx, "enrolled:tok-1"); err != nil {
		t.Fatalf("the token's answer: %v", err)
	}
}

// TestReadsOutsideAnUpdateSeeAnotherHandlesWrites: a handle's registry in
// memory follows what another handle (another process) commits and folds.
func TestReadsOutsideAnUpdateSeeAnotherHandlesWrites(t *testing.T) {
	st := genesisStore(t)
	st.reg.compactAt = 2 << 10
	other := newFileStore(st.l.Dir)
	other.reg.compactAt = 2 << 10
	ctx := ctxT(t)
	for i := range 60 {
		w, r := Store(st), Store(other)
		if i%2 == 1 {
			w, r = r, w
		}
		key := fmt.Sprintf("seq:%d", i+1)
		if err := w.Update(ctx, func(tx Tx) error {
			return tx.PutApplied(ctx, Applied{Key: key, At: time.Now(), Seq: uint64(i + 1)})
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Applied(ctx, key); err != nil {
			t.Fatalf("update %d: the other handle does not read it: %v", i+1, err)
		}
		if n, err := r.LedgerLen(ctx); err != nil || n != i+1 {
			t.Fatalf("update %d: the other handle counts %d (%v)", i+1, n, err)
		}
	}
}
