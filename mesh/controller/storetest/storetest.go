// Package storetest is the contract every implementation of
// controller.Store passes, written once: the file store's tests run it,
// and the PostgreSQL store's run the same body against a real server. It
// says what a caller may rely on whichever store it is given; what a
// store does about a crash mid-commit, and when it is unavailable, its own
// tests say (docs/controller-store.md).
package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/pki"
	"github.com/meshbus/mesh/mesh/wire"
)

// Backing makes a new, empty backing for the store under test (a
// directory, a database) and returns how to open it. Each call of open is
// a new handle on the same backing, as a controller started again would
// have: what one handle committed, the next reads.
type Backing func(t *testing.T) (open func() store.Store)

// Run runs the contract as subtests of t, each on a backing of its own.
func Run(t *testing.T, backing Backing) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, func() store.Store)
	}{
		{"AnEmptyStoreHoldsNoGenesis", emptyStore},
		{"WhatCreateRecordsIsReadBack", createReadBack},
		{"ASecondCreateIsRefused", secondCreate},
		{"WritesNeedAGenesis", writesNeedAGenesis},
		{"AnUpdateCommitsEveryWrite", updateCommits},
		{"AFailedUpdateKeepsNothing", failedUpdate},
		{"AnUpdateReadsItsOwnWrites", readsOwnWrites},
		{"UpdatesRunOneAtATime", updatesSerialised},
		{"AnEndedContextCommitsNothing", endedContext},
		{"TheStatusComesBackExactly", statusExact},
		{"TheRegistryCommitsWithItsUpdate", registryCommits},
		{"AFailedUpdateKeepsNoLedgerEntry", registryFailed},
		{"DeclarationsReportsAndTheDescription", declaredAndReported},
		{"PersonsAreKeptAndForgotten", personsKept},
		{"ASeatAdoptedIsKeptWithWhatTheServerWasRaisedWith", seatsKept},
		{"WhatWasSeenOfTheCompatibilityBrokerIsReplacedWhole", compatKept},
		{"TheCutoverRecordIsReplacedWhole", cutoverKept},
		{"TheLedgerIsPrunedBySequenceAndAge", ledgerPruned},
		{"APruneInAFailedUpdateKeepsEveryEntry", ledgerPruneFailed},
		{"AFailedPartOfAnUpdateKeepsNothingOfItsOwn", subUndone},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, backing(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// update runs fn in one Update of st, failing the test on an error.
func update(t *testing.T, st store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := ctxT(t)
	if err := st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// sample is a genesis as the controller makes one, with documents and
// hashes that need no minting.
func sample(t *testing.T) store.State {
	t.Helper()
	ca, err := pki.NewCA("storetest mesh authority", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	st := store.State{Secrets: store.Secrets{}, Authority: ca, DeclarationKey: key, Credentials: map[string][]byte{}}
	for _, u := range []string{wire.ControllerUser, wire.ControllerMeshUser, wire.HostUser("node-a"), wire.ModuleUser("node-a", "pg"), wire.EnrolUser("tok-1")} {
		st.Secrets[u] = store.Secret{Password: "pw-" + u, Hash: "$2a$04$hash-of-" + u}
		st.Credentials[u] = []byte(fmt.Sprintf("{\n  \"url\": \"tls://%s:pw-%s@bus:4222\"\n}\n", u, u))
	}
	return st
}

// created is a backing holding the sample genesis.
func created(t *testing.T, open func() store.Store) store.State {
	t.Helper()
	s := sample(t)
	if err := open().Create(ctxT(t), s); err != nil {
		t.Fatalf("create: %v", err)
	}
	return s
}

// holds checks that st holds exactly want: secrets, authority, key and
// credentials.
func holds(t *testing.T, st store.Store, want store.State) {
	t.Helper()
	ctx := ctxT(t)
	sec, err := st.Secrets(ctx)
	if err != nil || !reflect.DeepEqual(sec, want.Secrets) {
		t.Fatalf("secrets: expected %v, got %v (%v)", want.Secrets, sec, err)
	}
	ca, err := st.Authority(ctx)
	if err != nil || !bytes.Equal(ca.CertPEM, want.Authority.CertPEM) || !bytes.Equal(ca.KeyPEM, want.Authority.KeyPEM) {
		t.Fatalf("authority: not the one created (%v)", err)
	}
	key, err := st.DeclarationKey(ctx)
	if err != nil || !key.Equal(want.DeclarationKey) {
		t.Fatalf("declaration key: not the one put (%v)", err)
	}
	users, err := st.Credentials(ctx)
	wantUsers := slices.Sorted(maps.Keys(want.Credentials))
	if err != nil || !slices.Equal(users, wantUsers) {
		t.Fatalf("credentials: expected %v, got %v (%v)", wantUsers, users, err)
	}
	for u, doc := range want.Credentials {
		got, err := st.Credential(ctx, u)
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("credential of %s: expected %q, got %q (%v)", u, doc, got, err)
		}
	}
}

func emptyStore(t *testing.T, open func() store.Store) {
	st, ctx := open(), ctxT(t)
	if _, err := st.Secrets(ctx); !errors.Is(err, store.ErrNoGenesis) {
		t.Errorf("secrets: expected ErrNoGenesis, got %v", err)
	}
	if _, err := st.Authority(ctx); !errors.Is(err, store.ErrNoGenesis) {
		t.Errorf("authority: expected ErrNoGenesis, got %v", err)
	}
	if _, err := st.DeclarationKey(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("declaration key: expected ErrNotFound, got %v", err)
	}
	if _, err := st.Credential(ctx, wire.ControllerUser); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("credential: expected ErrNotFound, got %v", err)
	}
	if users, err := st.Credentials(ctx); err != nil || len(users) != 0 {
		t.Errorf("credentials: expected none, got %v (%v)", users, err)
	}
	s, err := st.Status(ctx)
	if err != nil || s.Through != 0 || !s.EventsCreated.IsZero() || s.Failing == nil || len(s.Failing) != 0 {
		t.Errorf("status: expected the empty status with Failing empty, not nil; got %+v (%v)", s, err)
	}
	for _, e := range []error{store.ErrNoGenesis, store.ErrNotFound} {
		if errors.Is(e, store.ErrStoreUnavailable) {
			t.Errorf("%v must not read as the store unavailable", e)
		}
	}
}

func createReadBack(t *testing.T, open func() store.Store) {
	want := created(t, open)
	holds(t, open(), want)
	if _, err := open().Credential(ctxT(t), wire.PersonUser("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a credential never issued: expected ErrNotFound, got %v", err)
	}
}

func secondCreate(t *testing.T, open func() store.Store) {
	want := created(t, open)
	again := sample(t)
	if err := open().Create(ctxT(t), again); !errors.Is(err, store.ErrGenesisExists) {
		t.Fatalf("a second create: expected ErrGenesisExists, got %v", err)
	}
	holds(t, open(), want)
}

func writesNeedAGenesis(t *testing.T, open func() store.Store) {
	st := open()
	for name, put := range map[string]func(ctx context.Context, tx store.Tx) error{
		"status": func(ctx context.Context, tx store.Tx) error {
			return tx.PutStatus(ctx, store.Status{Through: 1})
		},
		"secrets": func(ctx context.Context, tx store.Tx) error { return tx.PutSecrets(ctx, store.Secrets{}) },
		"credential": func(ctx context.Context, tx store.Tx) error {
			return tx.PutCredential(ctx, "controller", []byte("{}"))
		},
		"declaration key": func(ctx context.Context, tx store.Tx) error {
			return tx.PutDeclarationKey(ctx, sample(t).DeclarationKey)
		},
		"token": func(ctx context.Context, tx store.Tx) error {
			return tx.PutToken(ctx, store.Token{ID: "t", Node: "n", Expires: time.Now().Add(time.Hour)})
		},
		"node": func(ctx context.Context, tx store.Tx) error {
			return tx.PutNode(ctx, store.Node{Name: "n", SealingKey: "k"})
		},
		"ledger entry": func(ctx context.Context, tx store.Tx) error {
			return tx.PutApplied(ctx, store.Applied{Key: "seq:1"})
		},
		"person": func(ctx context.Context, tx store.Tx) error {
			return tx.PutPerson(ctx, store.Person{Name: "alice", Tools: store.Admin, SealingKey: "k", Issued: time.Now()})
		},
	} {
		ctx := ctxT(t)
		if err := st.Update(ctx, func(tx store.Tx) error { return put(ctx, tx) }); !errors.Is(err, store.ErrNoGenesis) {
			t.Errorf("put %s without a genesis: expected ErrNoGenesis, got %v", name, err)
		}
	}
	if s, err := open().Status(ctxT(t)); err != nil || s.Through != 0 {
		t.Errorf("a refused write was kept: %+v (%v)", s, err)
	}
}

func updateCommits(t *testing.T, open func() store.Store) {
	want := created(t, open)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	carol, tok := wire.PersonUser("carol"), wire.EnrolUser("tok-1")
	want.Secrets = maps.Clone(want.Secrets)
	delete(want.Secrets, tok)
	want.Secrets[carol] = store.Secret{Password: "pw-carol", Hash: "$2a$04$hash-of-carol"}
	want.Credentials = maps.Clone(want.Credentials)
	delete(want.Credentials, tok)
	want.Credentials[carol] = []byte("{\"url\": \"tls://person.carol:pw-carol@bus:4222\"}\n")
	want.Credentials[wire.ControllerUser] = []byte("{\"url\": \"tls://controller:pw-c@bus2:4222\"}\n")
	want.DeclarationKey = key
	status := store.Status{Through: 12, Failing: []store.FailingProvision{}}
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(
			tx.PutSecrets(ctx, want.Secrets),
			tx.PutCredential(ctx, carol, want.Credentials[carol]),
			tx.PutCredential(ctx, wire.ControllerUser, want.Credentials[wire.ControllerUser]),
			tx.DeleteCredential(ctx, tok),
			tx.DeleteCredential(ctx, wire.PersonUser("never-issued")),
			tx.PutDeclarationKey(ctx, key),
			tx.PutStatus(ctx, status),
		)
	})
	holds(t, open(), want)
	if _, err := open().Credential(ctxT(t), tok); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted credential: expected ErrNotFound, got %v", err)
	}

	// PutCredentials: the whole set, one changed, one new, one as held.
	dave := wire.PersonUser("dave")
	set := map[string][]byte{
		carol:               want.Credentials[carol],
		wire.ControllerUser: []byte("{\"url\": \"tls://controller:pw-c2@bus2:4222\"}\n"),
		dave:                []byte("{\"url\": \"tls://person.dave:pw-d@bus:4222\"}\n"),
	}
	var changed []string
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		var err error
		changed, err = tx.PutCredentials(ctx, set)
		return err
	})
	if wantChanged := []string{wire.ControllerUser, dave}; !slices.Equal(changed, wantChanged) {
		t.Errorf("PutCredentials: expected %v said changed, got %v", wantChanged, changed)
	}
	for u, doc := range set {
		if got, err := open().Credential(ctxT(t), u); err != nil || !bytes.Equal(got, doc) {
			t.Errorf("PutCredentials: %s holds %q (%v), expected %q", u, got, err, doc)
		}
	}
	want.Credentials[wire.ControllerUser], want.Credentials[dave] = set[wire.ControllerUser], set[dave]
	holds(t, open(), want)
	if err := open().Update(ctxT(t), func(tx store.Tx) error {
		_, err := tx.PutCredentials(ctxT(t), map[string][]byte{dave: nil})
		return err
	}); err == nil {
		t.Error("PutCredentials: expected an empty document refused")
	}
	if s, err := open().Status(ctxT(t)); err != nil || s.Through != 12 {
		t.Errorf("status: expected through 12, got %+v (%v)", s, err)
	}
}

func failedUpdate(t *testing.T, open func() store.Store) {
	want := created(t, open)
	refused := errors.New("the handler refuses")
	ctx := ctxT(t)
	err := open().Update(ctx, func(tx store.Tx) error {
		if err := errors.Join(
			tx.PutSecrets(ctx, store.Secrets{}),
			tx.DeleteCredential(ctx, wire.ControllerUser),
			tx.PutCredential(ctx, wire.PersonUser("carol"), []byte("{}\n")),
			tx.PutStatus(ctx, store.Status{Through: 99}),
		); err != nil {
			return err
		}
		return fmt.Errorf("after four writes: %w", refused)
	})
	if !errors.Is(err, refused) {
		t.Fatalf("expected the update to return fn's error, got %v", err)
	}
	holds(t, open(), want)
	if s, err := open().Status(ctxT(t)); err != nil || s.Through != 0 {
		t.Errorf("status of a failed update was kept: %+v (%v)", s, err)
	}
}

func readsOwnWrites(t *testing.T, open func() store.Store) {
	created(t, open)
	st, other := open(), open()
	carol := wire.PersonUser("carol")
	update(t, st, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutStatus(ctx, store.Status{Through: 5}); err != nil {
			return err
		}
		if err := tx.PutCredential(ctx, carol, []byte("{}\n")); err != nil {
			return err
		}
		if err := tx.DeleteCredential(ctx, wire.ControllerUser); err != nil {
			return err
		}
		if s, err := tx.Status(ctx); err != nil || s.Through != 5 {
			return fmt.Errorf("the update's status: expected through 5, got %+v (%v)", s, err)
		}
		if doc, err := tx.Credential(ctx, carol); err != nil || string(doc) != "{}\n" {
			return fmt.Errorf("the update's credential of carol: got %q (%v)", doc, err)
		}
		if _, err := tx.Credential(ctx, wire.ControllerUser); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the update's deleted credential: expected ErrNotFound, got %v", err)
		}
		users, err := tx.Credentials(ctx)
		if err != nil || !slices.Contains(users, carol) || slices.Contains(users, wire.ControllerUser) || !slices.IsSorted(users) {
			return fmt.Errorf("the update's credentials: expected carol in and the controller out, sorted; got %v (%v)", users, err)
		}
		// Nobody else sees the writes before the commit.
		if s, err := other.Status(ctx); err != nil || s.Through != 0 {
			return fmt.Errorf("another handle saw an uncommitted status: %+v (%v)", s, err)
		}
		return nil
	})
	if s, err := other.Status(ctxT(t)); err != nil || s.Through != 5 {
		t.Fatalf("after the commit another handle reads through %d (%v), expected 5", s.Through, err)
	}
}

// updatesSerialised: concurrent read-modify-write updates, through one
// handle and through two, lose none of each other's writes (the status
// fold and the CONTROL loop update the same store at once).
func updatesSerialised(t *testing.T, open func() store.Store) {
	created(t, open)
	const each = 10
	handles := []store.Store{open(), open()}
	handles = append(handles, handles[0])
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*each)
	for _, st := range handles {
		wg.Go(func() {
			for range each {
				ctx := ctxT(t)
				errs <- st.Update(ctx, func(tx store.Tx) error {
					s, err := tx.Status(ctx)
					if err != nil {
						return err
					}
					s.Through++
					return tx.PutStatus(ctx, s)
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	if s, err := open().Status(ctxT(t)); err != nil || s.Through != uint64(len(handles)*each) {
		t.Fatalf("expected through %d after as many increments, got %d (%v)", len(handles)*each, s.Through, err)
	}
}

func endedContext(t *testing.T, open func() store.Store) {
	created(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := open().Update(ctx, func(tx store.Tx) error { return tx.PutStatus(ctx, store.Status{Through: 3}) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an update under an ended context: expected context.Canceled, got %v", err)
	}
	if s, err := open().Status(ctxT(t)); err != nil || s.Through != 0 {
		t.Fatalf("an update under an ended context was kept: %+v (%v)", s, err)
	}
}

// statusExact: the status comes back as put, to the nanosecond (Rebase
// compares EVENTS's creation time with Equal, and a time rounded would
// read as another stream), its failing list sorted, never nil.
func statusExact(t *testing.T, open func() store.Store) {
	created(t, open)
	at := time.Date(2026, 11, 1, 10, 0, 0, 123456789, time.UTC)
	f := func(provider, node, consumer string) store.FailingProvision {
		return store.FailingProvision{
			Provider: provider, Consumer: consumer, Node: node, Class: wire.ClassUnreachable,
			Since: at, Said: at.Add(time.Millisecond), ReportedBy: node, EventID: "evt-" + provider + "-" + consumer,
		}
	}
	want := store.Status{
		Failing:       []store.FailingProvision{f("pg", "node-a", "billing"), f("pg", "node-b", "audit"), f("smtp", "node-a", "billing")},
		Through:       1<<53 + 1, // beyond what a float64 carries exactly
		EventsCreated: at.Add(-time.Hour),
	}
	put := want
	put.Failing = []store.FailingProvision{want.Failing[2], want.Failing[0], want.Failing[1]}
	update(t, open(), func(ctx context.Context, tx store.Tx) error { return tx.PutStatus(ctx, put) })
	got, err := open().Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !sameStatus(got, want) {
		t.Fatalf("status round trip:\n got %+v\nwant %+v", got, want)
	}
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return tx.PutStatus(ctx, store.Status{Through: 1})
	})
	if got, err := open().Status(ctxT(t)); err != nil || got.Failing == nil || len(got.Failing) != 0 || got.Through != 1 {
		t.Fatalf("a status put with Failing nil: expected it empty, not nil; got %+v (%v)", got, err)
	}
}

// sameStatus compares times by instant, as a store may give them back in
// another location.
func sameStatus(a, b store.Status) bool {
	if a.Through != b.Through || !a.EventsCreated.Equal(b.EventsCreated) || len(a.Failing) != len(b.Failing) {
		return false
	}
	for i, f := range a.Failing {
		g := b.Failing[i]
		if !f.Since.Equal(g.Since) || !f.Said.Equal(g.Said) {
			return false
		}
		f.Since, f.Said, g.Since, g.Said = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if f != g {
			return false
		}
	}
	return true
}

// registryCommits: tokens, nodes and ledger entries are read back as they
// were put, within the update and after it, one per id, name and key.
func registryCommits(t *testing.T, open func() store.Store) {
	created(t, open)
	issued := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tok := store.Token{ID: "t1", Node: "node-a", Issued: issued, Expires: issued.Add(time.Hour), Grace: 7 * time.Second}
	spent := tok
	spent.Spent = issued.Add(time.Minute)
	node := store.Node{Name: "node-a", SealingKey: "key-a", Enrolled: spent.Spent, Token: "t1"}
	entry := store.Applied{Key: store.LedgerKey(wire.SubjectEnrol, "msg-1", 7), At: spent.Spent, Outcome: []byte(`{"node":"node-a"}`)}
	ctx := ctxT(t)
	if _, err := open().Applied(ctx, entry.Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an empty ledger: expected ErrNotFound, got %v", err)
	}
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutToken(ctx, tok), tx.PutToken(ctx, store.Token{ID: "t2", Node: "node-b", Issued: issued, Expires: issued.Add(time.Hour)}))
	})
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		if err := errors.Join(tx.PutToken(ctx, spent), tx.PutNode(ctx, node), tx.PutApplied(ctx, entry)); err != nil {
			return err
		}
		if got, err := tx.Applied(ctx, entry.Key); err != nil || !bytes.Equal(got.Outcome, entry.Outcome) {
			return fmt.Errorf("the update does not read its own ledger entry: %+v, %v", got, err)
		}
		return nil
	})
	st := open()
	toks, err := st.Tokens(ctx)
	if err != nil || len(toks) != 2 || !sameToken(toks[0], spent) || toks[1].ID != "t2" || !toks[1].Spent.IsZero() || toks[1].Grace != 0 {
		t.Fatalf("tokens: expected t1 spent with its grace and t2 unspent with none, got %+v (%v)", toks, err)
	}
	nodes, err := st.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Name != node.Name || nodes[0].SealingKey != node.SealingKey || !nodes[0].Enrolled.Equal(node.Enrolled) || nodes[0].Token != "t1" {
		t.Fatalf("nodes: expected %+v, got %+v (%v)", node, nodes, err)
	}
	got, err := st.Applied(ctx, entry.Key)
	if err != nil || got.Key != entry.Key || !got.At.Equal(entry.At) || !bytes.Equal(got.Outcome, entry.Outcome) {
		t.Fatalf("ledger: expected %+v, got %+v (%v)", entry, got, err)
	}
}

// registryFailed: a failed update keeps neither the effect nor its ledger
// entry, so the message it handled is applied when it comes again.
func registryFailed(t *testing.T, open func() store.Store) {
	created(t, open)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	key := store.LedgerKey(wire.SubjectEnrol, "", 9)
	refused := errors.New("the answer could not be composed")
	ctx := ctxT(t)
	err := open().Update(ctx, func(tx store.Tx) error {
		if err := errors.Join(
			tx.PutToken(ctx, store.Token{ID: "t1", Node: "node-a", Issued: now, Expires: now.Add(time.Hour), Spent: now}),
			tx.PutNode(ctx, store.Node{Name: "node-a", SealingKey: "k", Enrolled: now}),
			tx.PutApplied(ctx, store.Applied{Key: key, At: now}),
			tx.PutDeclared(ctx, wire.Declaration{Node: "node-a", Revision: 1, Modules: []string{"pg"}}),
			tx.PutDescription(ctx, []byte("name: m\n")),
		); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("expected the update to return fn's error, got %v", err)
	}
	st := open()
	if _, err := st.Applied(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed update's ledger entry: expected ErrNotFound, got %v", err)
	}
	if toks, err := st.Tokens(ctx); err != nil || len(toks) != 0 {
		t.Errorf("a failed update's token: %+v (%v)", toks, err)
	}
	if nodes, err := st.Nodes(ctx); err != nil || len(nodes) != 0 {
		t.Errorf("a failed update's node: %+v (%v)", nodes, err)
	}
	if d, err := st.Declared(ctx); err != nil || len(d) != 0 {
		t.Errorf("a failed update's declaration: %+v (%v)", d, err)
	}
	if _, err := st.Description(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed update's description: expected ErrNotFound, got %v", err)
	}
}

// declaredAndReported: one declaration and one report per node, the
// newest; a declaration forgotten; the description as pushed.
func declaredAndReported(t *testing.T, open func() store.Store) {
	created(t, open)
	ctx := ctxT(t)
	if _, err := open().Description(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the description before a push: expected ErrNotFound, got %v", err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC)
	a1 := wire.Declaration{Node: "node-a", Revision: 1, Modules: []string{"pg"}}
	a2 := wire.Declaration{Node: "node-a", Revision: 2, Modules: []string{"pg"}, Versions: map[string]string{"pg": "2.0"}}
	b1 := wire.Declaration{Node: "node-b", Revision: 1, Modules: []string{}}
	c1 := wire.Declaration{Node: "node-c", Revision: 3, Modules: []string{"x"}}
	rep := store.Reported{Report: wire.Report{Kind: wire.KindReport, Node: "node-a", ID: "r1", At: at, Applied: 1}, Seq: 4, Received: at}
	rep2 := rep
	rep2.Report.ID, rep2.Report.Applied, rep2.Report.Running, rep2.Seq, rep2.Bus = "r2", 2, map[string]string{"pg": "2.0"}, 9, "nats"
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutDeclared(ctx, a1), tx.PutDeclared(ctx, b1), tx.PutDeclared(ctx, c1), tx.PutReport(ctx, rep), tx.PutDescription(ctx, []byte("name: one\n")))
	})
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutDeclared(ctx, a2), tx.DeleteDeclared(ctx, "node-c"), tx.DeleteDeclared(ctx, "never"), tx.PutReport(ctx, rep2), tx.PutDescription(ctx, []byte("name: two\n")))
	})
	st := open()
	got, err := st.Declared(ctx)
	if err != nil || !reflect.DeepEqual(got, []wire.Declaration{a2, b1}) {
		t.Fatalf("declared: expected %+v, got %+v (%v)", []wire.Declaration{a2, b1}, got, err)
	}
	reps, err := st.Reports(ctx)
	if err != nil || len(reps) != 1 || reps[0].Seq != 9 || reps[0].Report.ID != "r2" || !reps[0].Report.At.Equal(at) || reps[0].Report.Running["pg"] != "2.0" || reps[0].Bus != "nats" {
		t.Fatalf("reports: expected r2 alone, on nats, got %+v (%v)", reps, err)
	}
	if d, err := st.Description(ctx); err != nil || string(d) != "name: two\n" {
		t.Fatalf("description: %q (%v)", d, err)
	}
	if l, err := st.Liveness(ctx); err != nil || !l.At.IsZero() {
		t.Fatalf("liveness before any: %+v (%v)", l, err)
	}
	live := store.Liveness{At: at, Connected: true, ConnectedSince: at.Add(-time.Minute), Heard: map[string]time.Time{"node-a": at.Add(-time.Second)}}
	update(t, open(), func(ctx context.Context, tx store.Tx) error { return tx.PutLiveness(ctx, live) })
	if l, err := open().Liveness(ctx); err != nil || !l.At.Equal(at) || !l.Connected || !l.ConnectedSince.Equal(live.ConnectedSince) || !l.Heard["node-a"].Equal(live.Heard["node-a"]) {
		t.Fatalf("liveness: expected %+v, got %+v (%v)", live, l, err)
	}
	d1 := store.DeadLetter{DeadSeq: 7, Consumer: "node-b_logger", Node: "node-b", Module: "logger", StreamSeq: 40, EventID: "e1", Deliveries: 5, At: at}
	d2 := d1
	d2.DeadSeq, d2.EventID = 3, "e0"
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutDeadLetter(ctx, d1), tx.PutDeadLetter(ctx, d2), tx.PutDeadLetter(ctx, d1))
	})
	if dead, err := open().DeadLetters(ctx); err != nil || len(dead) != 2 || dead[0].DeadSeq != 3 || dead[1].EventID != "e1" || !dead[1].At.Equal(at) {
		t.Fatalf("dead letters: expected 3 then 7, got %+v (%v)", dead, err)
	}
	// A bus that keeps no positions (AMQP): a letter is known by its
	// consumer and event id, one record however often it is put, apart
	// from DEAD's sequences; those without a sequence come first, by time.
	n1 := store.DeadLetter{Consumer: "node-b_logger", Node: "node-b", Module: "logger", EventID: "e1", Deliveries: 4, At: at.Add(time.Minute)}
	n2 := n1
	n2.EventID, n2.At = "e2", at.Add(-time.Minute)
	n1again := n1
	n1again.Deliveries = 5
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutDeadLetter(ctx, n1), tx.PutDeadLetter(ctx, n2), tx.PutDeadLetter(ctx, n1again))
	})
	dead, err := open().DeadLetters(ctx)
	var letters []string
	for _, d := range dead {
		letters = append(letters, fmt.Sprintf("%d/%s/%d", d.DeadSeq, d.EventID, d.Deliveries))
	}
	if want := []string{"0/e2/4", "0/e1/5", "3/e0/5", "7/e1/5"}; err != nil || !slices.Equal(letters, want) {
		t.Fatalf("dead letters with and without a sequence: expected %v, got %v (%v)", want, letters, err)
	}
	if err := open().Update(ctx, func(tx store.Tx) error {
		return tx.PutDeadLetter(ctx, store.DeadLetter{Consumer: "node-b_logger", Deliveries: 5, At: at})
	}); err == nil {
		t.Fatal("expected a dead letter with neither a sequence nor an event id refused")
	}
	if dead, _ := open().DeadLetters(ctx); len(dead) != 4 {
		t.Fatalf("a refused dead letter was kept: %+v", dead)
	}
	if r, err := open().Refusals(ctx); err != nil || r.Total() != 0 || r.Counts == nil || r.Last == nil {
		t.Fatalf("refusals before any: expected none, with a map and a list, got %+v (%v)", r, err)
	}
	refused := store.Refusals{Counts: map[string]int{store.RefusedEnrolment: 3, store.RefusedPush: 1},
		Last: []store.Refusal{{Kind: store.RefusedPush, Key: "seq:4", At: at, Reason: "modules[0]: no name"}}}
	update(t, open(), func(ctx context.Context, tx store.Tx) error { return tx.PutRefusals(ctx, refused) })
	if r, err := open().Refusals(ctx); err != nil || r.Total() != 4 || len(r.Last) != 1 || r.Last[0].Key != "seq:4" || !r.Last[0].At.Equal(at) || r.Last[0].Reason != refused.Last[0].Reason {
		t.Fatalf("refusals: expected %+v, got %+v (%v)", refused, r, err)
	}
	tooMany := store.Refusals{Last: make([]store.Refusal, store.MaxRefusalsKept+1)}
	for i := range tooMany.Last {
		tooMany.Last[i] = store.Refusal{Kind: store.RefusedOther, Key: fmt.Sprintf("seq:%d", i+1)}
	}
	if err := open().Update(ctx, func(tx store.Tx) error { return tx.PutRefusals(ctx, tooMany) }); err == nil {
		t.Fatal("expected more refusals than are kept refused")
	}
}

func sameToken(a, b store.Token) bool {
	return a.ID == b.ID && a.Node == b.Node && a.Issued.Equal(b.Issued) && a.Expires.Equal(b.Expires) && a.Spent.Equal(b.Spent) && a.Grace == b.Grace
}

// personsKept: a person put is read back whole, in name order; put again
// it is replaced; deleted it is gone, and deleting one not there is no
// error; one without its grant or key is refused.
func personsKept(t *testing.T, open func() store.Store) {
	st := open()
	created(t, func() store.Store { return st })
	issued := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	carol := store.Person{Name: "carol", Tools: []string{"sensor.calibrate"}, SealingKey: "key-c", Issued: issued}
	alice := store.Person{Name: "alice", Tools: store.Admin, SealingKey: "key-a", Issued: issued}
	update(t, st, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutPerson(ctx, carol), tx.PutPerson(ctx, alice))
	})
	got, err := open().Persons(ctxT(t))
	if err != nil || len(got) != 2 || got[0].Name != "alice" || got[1].Name != "carol" || !reflect.DeepEqual(got[1].Tools, carol.Tools) ||
		got[1].SealingKey != "key-c" || !got[1].Issued.Equal(issued) {
		t.Fatalf("persons read back: %+v, %v", got, err)
	}
	carol.Tools = []string{"sensor.*"}
	update(t, st, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.PutPerson(ctx, carol), tx.DeletePerson(ctx, "alice"), tx.DeletePerson(ctx, "nobody"))
	})
	if got, err := open().Persons(ctxT(t)); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Tools, []string{"sensor.*"}) {
		t.Fatalf("after replacing carol and deleting alice: %+v, %v", got, err)
	}
	for _, bad := range []store.Person{{Name: "dave", SealingKey: "k", Issued: issued}, {Name: "dave", Tools: store.Admin, Issued: issued}, {Name: "Dave!", Tools: store.Admin, SealingKey: "k", Issued: issued}} {
		ctx := ctxT(t)
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutPerson(ctx, bad) }); err == nil {
			t.Errorf("a person %+v was kept", bad)
		}
	}
}

// seatsKept: a seat adopted is read back whole, what its server was raised
// with included, by another opening of the store; a failed update keeps
// none; a seat without its server or configuration is refused.
func seatsKept(t *testing.T, open func() store.Store) {
	st := open()
	created(t, func() store.Store { return st })
	adopted := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	seat := store.Seat{Name: wire.BrokerSeat, Module: "nats", Server: "http://nats:8222", ServerID: "NABC",
		Config: "/var/lib/mesh/adopted/nats.conf", Raised: []byte("listen: 4222\n"), Adopted: adopted}
	ctx := ctxT(t)
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutSeat(ctx, seat); err != nil {
			return err
		}
		return errors.New("the adoption failed after its seat was put")
	}); err == nil {
		t.Fatal("expected the failed update's error")
	}
	if got, err := open().Seats(ctxT(t)); err != nil || len(got) != 0 {
		t.Fatalf("a failed update kept seats %+v, %v", got, err)
	}
	update(t, st, func(ctx context.Context, tx store.Tx) error { return tx.PutSeat(ctx, seat) })
	got, err := open().Seats(ctxT(t))
	if err != nil || len(got) != 1 || got[0].Name != seat.Name || got[0].Module != "nats" || got[0].ServerID != "NABC" ||
		got[0].Config != seat.Config || string(got[0].Raised) != "listen: 4222\n" || !got[0].Adopted.Equal(adopted) {
		t.Fatalf("seats read back: %+v, %v", got, err)
	}
	for _, bad := range []store.Seat{{Name: wire.BrokerSeat, Module: "nats", Config: "c", Raised: []byte("x"), Adopted: adopted},
		{Name: wire.BrokerSeat, Module: "nats", Server: "s", Raised: []byte("x"), Adopted: adopted},
		{Name: wire.BrokerSeat, Module: "nats", Server: "s", Config: "c", Adopted: adopted}} {
		ctx := ctxT(t)
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutSeat(ctx, bad) }); err == nil {
			t.Errorf("a seat %+v was kept", bad)
		}
	}
}

// compatKept: before the controller looked, there is no record; a record
// put is read back whole by another opening of the store, and replaced
// whole by the next; one without its module or time is refused.
func compatKept(t *testing.T, open func() store.Store) {
	st := open()
	created(t, func() store.Store { return st })
	if _, err := open().Compat(ctxT(t)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expected ErrNotFound before any look, got %v", err)
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	seen := store.Compat{Module: "amqp-compat", Checked: at, Connected: map[string]int{"legacy-app": 1}}
	update(t, st, func(ctx context.Context, tx store.Tx) error { return tx.PutCompat(ctx, seen) })
	got, err := open().Compat(ctxT(t))
	if err != nil || got.Module != "amqp-compat" || !got.Checked.Equal(at) || got.Connected["legacy-app"] != 1 || !got.IdleSince.IsZero() {
		t.Fatalf("compat read back: %+v, %v", got, err)
	}
	idle := store.Compat{Module: "amqp-compat", Checked: at.Add(time.Minute), Connected: map[string]int{}, IdleSince: at.Add(time.Minute)}
	update(t, st, func(ctx context.Context, tx store.Tx) error { return tx.PutCompat(ctx, idle) })
	if got, err := open().Compat(ctxT(t)); err != nil || len(got.Connected) != 0 || !got.IdleSince.Equal(idle.IdleSince) {
		t.Fatalf("compat replaced: %+v, %v", got, err)
	}
	ctx := ctxT(t)
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutCompat(ctx, store.Compat{Module: "amqp-compat"}) }); err == nil {
		t.Error("a record without when it was checked was kept")
	}
}

// cutoverKept: before the first cutover, there is no record; a record put
// is read back whole by another opening of the store, and replaced whole
// by the next (a node it no longer names is gone); one that could not have
// been begun is refused, the earlier one kept; what a caller reads is its
// own to change.
func cutoverKept(t *testing.T, open func() store.Store) {
	st := open()
	created(t, func() store.Store { return st })
	if _, err := open().Cutover(ctxT(t)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expected ErrNotFound before any cutover, got %v", err)
	}
	at := time.Date(2026, 12, 5, 10, 0, 0, 123456789, time.UTC)
	first := store.Cutover{
		Generation: 1, From: "amqp", To: "nats", Phase: store.CutoverPrepare, PhaseSince: at.Add(time.Second), Begun: at,
		Within: 10 * time.Minute,
		Target: store.BusTarget{Addr: "nats.example:4222", Fingerprint: "ab12"},
		Old:    store.BusTarget{Addr: "rabbitmq.example:5671", Fingerprint: "cd34"},
		Nodes: map[string]store.CutoverNode{
			"node-a": {Prepare: 3, Switch: 4, Prepared: at.Add(time.Minute), Switched: at.Add(2 * time.Minute)},
			"node-b": {Prepare: 5, Refused: "cannot reach nats.example:4222"},
		},
		Blocked: "node-b overdue",
	}
	update(t, st, func(ctx context.Context, tx store.Tx) error { return tx.PutCutover(ctx, first) })
	got, err := open().Cutover(ctxT(t))
	if err != nil {
		t.Fatalf("cutover read back: %v", err)
	}
	if !sameCutover(got, first) {
		t.Fatalf("cutover read back: expected %+v, got %+v", first, got)
	}
	if !got.Ended.IsZero() {
		t.Fatalf("a cutover not ended read back ended at %v", got.Ended)
	}
	second := first
	second.Phase, second.PhaseSince, second.Ended = store.CutoverDone, at.Add(time.Hour), at.Add(time.Hour)
	second.Stopped, second.Blocked = "", ""
	second.Nodes = map[string]store.CutoverNode{"node-a": first.Nodes["node-a"]}
	update(t, st, func(ctx context.Context, tx store.Tx) error { return tx.PutCutover(ctx, second) })
	got, err = open().Cutover(ctxT(t))
	if err != nil || !sameCutover(got, second) {
		t.Fatalf("cutover replaced: expected %+v, got %+v (%v)", second, got, err)
	}
	if _, kept := got.Nodes["node-b"]; kept || got.Blocked != "" || !got.Ended.Equal(second.Ended) {
		t.Fatalf("cutover not replaced whole: %+v", got)
	}
	ctx := ctxT(t)
	for _, bad := range []store.Cutover{{From: "amqp", To: "nats", Phase: store.CutoverCompose, Begun: at},
		{Generation: 2, To: "nats", Phase: store.CutoverCompose, Begun: at},
		{Generation: 2, From: "amqp", To: "nats", Begun: at},
		{Generation: 2, From: "amqp", To: "nats", Phase: store.CutoverCompose}} {
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutCutover(ctx, bad) }); err == nil {
			t.Errorf("a cutover %+v was kept", bad)
		}
	}
	read, err := open().Cutover(ctx)
	if err != nil || !sameCutover(read, second) {
		t.Fatalf("the cutover after refusals: expected %+v, got %+v (%v)", second, read, err)
	}
	read.Nodes["node-z"] = store.CutoverNode{Prepare: 9}
	delete(read.Nodes, "node-a")
	for _, s := range []store.Store{st, open()} {
		if got, err := s.Cutover(ctx); err != nil || !sameCutover(got, second) {
			t.Fatalf("the cutover after a caller changed what it read: expected %+v, got %+v (%v)", second, got, err)
		}
	}
	// Inside an update too: what the update reads of its own write is
	// its own copy, not the record it put nor what the store keeps.
	update(t, st, func(ctx context.Context, tx store.Tx) error {
		put := second
		put.Generation, put.Nodes = 2, maps.Clone(second.Nodes)
		if err := tx.PutCutover(ctx, put); err != nil {
			return err
		}
		put.Nodes["node-y"] = store.CutoverNode{}
		c, err := tx.Cutover(ctx)
		if err != nil {
			return err
		}
		if _, aliased := c.Nodes["node-y"]; aliased || c.Generation != 2 {
			return fmt.Errorf("an update's own cutover read back %+v", c)
		}
		c.Nodes["node-x"] = store.CutoverNode{}
		return nil
	})
	if got, err := open().Cutover(ctx); err != nil || got.Generation != 2 || len(got.Nodes) != 1 {
		t.Fatalf("the cutover of generation 2: %+v (%v)", got, err)
	}
}

// sameCutover says whether a and b are one record: times compared as
// instants, as a store may give them back in another location.
func sameCutover(a, b store.Cutover) bool {
	if a.Generation != b.Generation || a.From != b.From || a.To != b.To || a.Phase != b.Phase ||
		!a.PhaseSince.Equal(b.PhaseSince) || !a.Begun.Equal(b.Begun) || a.Within != b.Within ||
		a.Target != b.Target || a.Old != b.Old || a.Stopped != b.Stopped || a.Blocked != b.Blocked ||
		!a.Ended.Equal(b.Ended) || len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for name, n := range a.Nodes {
		m, ok := b.Nodes[name]
		if !ok || n.Prepare != m.Prepare || n.Switch != m.Switch || n.Refused != m.Refused ||
			!n.Prepared.Equal(m.Prepared) || !n.Switched.Equal(m.Switched) {
			return false
		}
	}
	return true
}

// putLedgerEntries enters ledgerEntries(t0) in the ledger in one update
// and returns them.
func putLedgerEntries(t *testing.T, open func() store.Store, t0 time.Time) []store.Applied {
	t.Helper()
	entries := ledgerEntries(t0)
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		for _, a := range entries {
			if err := tx.PutApplied(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
	return entries
}

// ledgerEntries are six entries of messages at CONTROL sequences 1 to 6,
// one a second from t0, and one that is no message's (Seq 0, the answer
// a token was spent with) older than all of them.
func ledgerEntries(t0 time.Time) []store.Applied {
	out := []store.Applied{{Key: "enrolled:tok-1", At: t0.Add(-time.Hour), Outcome: []byte(`{"node":"node-a"}`)}}
	for i := range 6 {
		seq := uint64(i + 1)
		key := store.LedgerKey(wire.NodeReport("node-a"), fmt.Sprintf("r%d", seq), seq)
		if i%2 == 1 {
			key = store.LedgerKey(wire.SubjectEnrol, "", seq)
		}
		out = append(out, store.Applied{Key: key, At: t0.Add(time.Duration(i) * time.Second), Seq: seq})
	}
	return out
}

// ledgerPruned: PruneLedger forgets exactly the entries of a sequence
// below its bound applied before its time (a message still in the stream,
// or within the duplicate window, keeps its entry), never one without a
// sequence; its sequence comes back as it was put; another handle reads
// the same, and a prune again forgets nothing more.
func ledgerPruned(t *testing.T, open func() store.Store) {
	created(t, open)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	entries := putLedgerEntries(t, open, t0)
	if n, err := open().LedgerLen(ctx); err != nil || n != len(entries) {
		t.Fatalf("ledger length: expected %d, got %d (%v)", len(entries), n, err)
	}
	for _, a := range entries {
		got, err := open().Applied(ctx, a.Key)
		if err != nil || got.Seq != a.Seq || !got.At.Equal(a.At) {
			t.Fatalf("entry %s: expected seq %d at %v, got %+v (%v)", a.Key, a.Seq, a.At, got, err)
		}
	}
	// Below 5 (5 and 6 still in the stream) and before t0+3s (the entry
	// of 4, at t0+3s, is within the window): 1, 2 and 3 go.
	var pruned int
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		var err error
		if pruned, err = tx.PruneLedger(ctx, 5, t0.Add(3*time.Second)); err != nil {
			return err
		}
		if n, err := tx.LedgerLen(ctx); err != nil || n != len(entries)-3 {
			return fmt.Errorf("the update's ledger length after its prune: %d (%v)", n, err)
		}
		if _, err := tx.Applied(ctx, entries[1].Key); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the update still reads a pruned entry: %v", err)
		}
		return nil
	})
	if pruned != 3 {
		t.Fatalf("pruned: expected 3, got %d", pruned)
	}
	st := open()
	for i, a := range entries {
		_, err := st.Applied(ctx, a.Key)
		gone := i >= 1 && i <= 3
		if gone && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("entry %s (seq %d) should be pruned: %v", a.Key, a.Seq, err)
		}
		if !gone && err != nil {
			t.Errorf("entry %s (seq %d) should be kept: %v", a.Key, a.Seq, err)
		}
	}
	if n, err := st.LedgerLen(ctx); err != nil || n != len(entries)-3 {
		t.Fatalf("ledger length after the prune: expected %d, got %d (%v)", len(entries)-3, n, err)
	}
	// Everything gone from the stream, long after: all but the answer.
	var again int
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		var err error
		again, err = tx.PruneLedger(ctx, 1<<40, t0.Add(time.Hour))
		return err
	})
	if again != 3 {
		t.Fatalf("the second prune: expected 3, got %d", again)
	}
	if n, err := open().LedgerLen(ctx); err != nil || n != 1 {
		t.Fatalf("ledger length: expected the answer alone, got %d (%v)", n, err)
	}
	if got, err := open().Applied(ctx, entries[0].Key); err != nil || !bytes.Equal(got.Outcome, entries[0].Outcome) {
		t.Fatalf("a token's answer is never pruned: %+v (%v)", got, err)
	}
}

// ledgerPruneFailed: a prune is part of its update: the update failing,
// every entry stays.
func ledgerPruneFailed(t *testing.T, open func() store.Store) {
	created(t, open)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	entries := putLedgerEntries(t, open, t0)
	failed := errors.New("fn failed")
	err := open().Update(ctx, func(tx store.Tx) error {
		if n, err := tx.PruneLedger(ctx, 1<<40, t0.Add(time.Hour)); err != nil || n != len(entries)-1 {
			return fmt.Errorf("prune: %d, %v", n, err)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("expected fn's error, got %v", err)
	}
	if n, err := open().LedgerLen(ctx); err != nil || n != len(entries) {
		t.Fatalf("a failed prune kept %d of %d entries (%v)", n, len(entries), err)
	}
}

// subUndone: a part of an update (SubTx.Sub) that fails keeps nothing of
// its own, in the update and after it; the update's other writes, before
// and after that part, and a part that succeeds, are committed.
func subUndone(t *testing.T, open func() store.Store) {
	created(t, open)
	ctx := ctxT(t)
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	tok := func(id string) store.Token {
		return store.Token{ID: id, Node: "node-a", Issued: now, Expires: now.Add(time.Hour)}
	}
	failed := errors.New("this message's handler failed")
	update(t, open(), func(ctx context.Context, tx store.Tx) error {
		sub, ok := tx.(store.SubTx)
		if !ok {
			return fmt.Errorf("%T is no SubTx", tx)
		}
		if err := tx.PutToken(ctx, tok("t1")); err != nil {
			return err
		}
		if err := sub.Sub(ctx, func() error {
			return errors.Join(tx.PutToken(ctx, tok("t2")), tx.PutApplied(ctx, store.Applied{Key: "seq:2", At: now, Seq: 2}), failed)
		}); !errors.Is(err, failed) {
			return fmt.Errorf("the failed part: expected its error, got %v", err)
		}
		if _, err := tx.Applied(ctx, "seq:2"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the failed part's entry is still read: %v", err)
		}
		if err := sub.Sub(ctx, func() error {
			return tx.PutApplied(ctx, store.Applied{Key: "seq:3", At: now, Seq: 3})
		}); err != nil {
			return err
		}
		return tx.PutToken(ctx, tok("t4"))
	})
	st := open()
	toks, err := st.Tokens(ctx)
	if err != nil || len(toks) != 2 || toks[0].ID != "t1" || toks[1].ID != "t4" {
		t.Fatalf("tokens: expected t1 and t4, got %+v (%v)", toks, err)
	}
	if _, err := st.Applied(ctx, "seq:2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the failed part's entry: %v", err)
	}
	if a, err := st.Applied(ctx, "seq:3"); err != nil || a.Seq != 3 {
		t.Fatalf("the other part's entry: %+v (%v)", a, err)
	}
}
