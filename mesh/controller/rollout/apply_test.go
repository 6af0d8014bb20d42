package rollout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// edit changes the bed's description: carol joins, the enrolment token is
// spent (removed).
func edit(t *testing.T, m *meshdesc.Mesh) *meshdesc.Mesh {
	c := *m
	c.Persons = append(slices.Clone(m.Persons), meshdesc.Person{Name: "carol", Tools: []string{"sensor.calibrate"}})
	c.Tokens = nil
	return controllertest.Revalidate(t, &c)
}

func TestApplyAddsAndRemovesUsers(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	l := statedir.Layout{Dir: b.Dir}
	before, _ := b.St.Secrets(controllertest.Ctx(t))
	confBefore, _ := os.ReadFile(l.NATSConfig())
	stBefore, _ := os.Stat(l.NATSConfig())

	m2 := edit(t, b.M)
	res, err := rollout.Apply(controllertest.Ctx(t), m2, b.St, b.Dir, b.Opts)
	if err != nil {
		t.Fatal(err)
	}
	carol, tok := wire.PersonUser("carol"), wire.EnrolUser("tok-node-c")
	if !slices.Equal(res.Added, []string{carol}) || !slices.Equal(res.Removed, []string{tok}) || !res.ConfigChanged {
		t.Fatalf("expected +%s -%s and a new nats.conf, got %+v", carol, tok, res)
	}
	after, _ := b.St.Secrets(controllertest.Ctx(t))
	for u, sec := range before {
		if u == tok {
			continue
		}
		if after[u] != sec {
			t.Errorf("%s: secret changed by an apply that kept the user", u)
		}
	}
	if _, ok := after[tok]; ok {
		t.Errorf("%s: secret kept after removal", tok)
	}
	if _, err := os.Stat(l.Credential(tok)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: credential file not deleted: %v", tok, err)
	}
	if c := b.Credential(carol); c.Principal != wire.PrincipalPerson || c.Name != "carol" {
		t.Errorf("carol's credential: got %+v", c)
	}
	conf, _ := os.ReadFile(l.NATSConfig())
	if bytes.Equal(conf, confBefore) || !bytes.Contains(conf, []byte(after[carol].Hash)) || bytes.Contains(conf, []byte(`"`+tok+`"`)) {
		t.Fatal("nats.conf does not carry carol and drop the token")
	}
	// Replaced by a rename, not rewritten in place: a reader sees the old
	// file or the new one, never a torn one.
	stAfter, _ := os.Stat(l.NATSConfig())
	if os.SameFile(stBefore, stAfter) {
		t.Error("nats.conf was written in place; expected a new file renamed over it")
	}
	entries, _ := os.ReadDir(filepath.Join(l.Dir, statedir.NATSDir))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	// The same description again changes nothing, not even the file.
	res, err = rollout.Apply(controllertest.Ctx(t), m2, b.St, b.Dir, b.Opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added)+len(res.Removed)+len(res.CredentialsWritten) > 0 || res.ConfigChanged {
		t.Fatalf("expected a second apply to change nothing, got %+v", res)
	}
	if st, _ := os.Stat(l.NATSConfig()); !os.SameFile(stAfter, st) {
		t.Error("an apply with nothing to change replaced nats.conf")
	}
}

// TestApplyComposesTheDescriptionInForce: a composition outside the loop
// (a token or a person issued) that read the description before a push
// was applied still composes the pushed one, which it reads under the
// composition lock: it must not take away the users the push added.
func TestApplyComposesTheDescriptionInForce(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	pushed := edit(t, b.M)
	data, err := yaml.Marshal(pushed)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.St.Update(controllertest.Ctx(t), func(tx store.Tx) error { return tx.PutDescription(controllertest.Ctx(t), data) }); err != nil {
		t.Fatal(err)
	}
	res, err := rollout.Apply(controllertest.Ctx(t), b.M, b.St, b.Dir, b.Opts) // b.m: read before the push
	if err != nil {
		t.Fatal(err)
	}
	if carol := wire.PersonUser("carol"); !slices.Contains(res.Added, carol) {
		t.Fatalf("expected the pushed description's %s composed, got %+v", carol, res)
	}
}

// TestApplyIsLiveAfterReload: the composed change, reloaded by the
// server, admits the new user and refuses the removed one.
func TestApplyIsLiveAfterReload(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	tok := wire.EnrolUser("tok-node-c")
	nc, err := b.Dial(tok)
	if err != nil {
		t.Fatalf("the token should connect before the apply: %v", err)
	}
	nc.Close()
	tokCred := b.Credential(tok)

	if _, err := rollout.Apply(controllertest.Ctx(t), edit(t, b.M), b.St, b.Dir, b.Opts); err != nil {
		t.Fatal(err)
	}
	if err := b.Srv.Reload(); err != nil {
		t.Fatalf("the server refused to reload the applied configuration: %v", err)
	}
	nc, err = b.Dial(wire.PersonUser("carol"))
	if err != nil {
		t.Fatalf("carol should connect after the apply: %v", err)
	}
	nc.Close()
	if nc, err := controllertest.DialWith(tokCred); err == nil {
		nc.Close()
		t.Fatal("the removed token still connects")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("expected an authorization refusal, got %v", err)
	}
}

func TestApplyRefusesWhatCannotReload(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	m2 := *b.M
	m2.Bus.Names = append(slices.Clone(b.M.Bus.Names), "nats-elsewhere")
	if _, err := rollout.Apply(controllertest.Ctx(t), controllertest.Revalidate(t, &m2), b.St, b.Dir, b.Opts); !errors.Is(err, rollout.ErrNotReloadable) || !strings.Contains(err.Error(), "nats-elsewhere") {
		t.Fatalf("expected ErrNotReloadable naming the new bus name, got %v", err)
	}
	o := b.Opts
	o.Server.Listen = "127.0.0.1:1"
	if _, err := rollout.Apply(controllertest.Ctx(t), b.M, b.St, b.Dir, o); !errors.Is(err, rollout.ErrNotReloadable) || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("expected ErrNotReloadable naming listen, got %v", err)
	}
	empty := t.TempDir()
	if _, err := rollout.Apply(controllertest.Ctx(t), b.M, store.FileStore(empty), empty, b.Opts); !errors.Is(err, store.ErrNoGenesis) {
		t.Fatalf("expected ErrNoGenesis on an empty directory, got %v", err)
	}
}

// TestAnInterruptedApplyIsFinishedByTheNext: an apply that crashed right
// after writing the secrets left the state as written here: the revoked
// token's secret gone but its credential file (and its password) still on
// disk, a new person's secret minted but no credential yet, half a
// temporary credential file, and the old nats.conf. The next apply
// derives what to remove from the disk and finishes the job.
func TestAnInterruptedApplyIsFinishedByTheNext(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	l := statedir.Layout{Dir: b.Dir}
	m2 := edit(t, b.M)
	carol, tok := wire.PersonUser("carol"), wire.EnrolUser("tok-node-c")

	// The state as the interrupted apply left it.
	secrets, err := b.St.Secrets(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	delete(secrets, tok)
	if secrets[carol], err = rollout.MintSecret(b.Opts.BcryptCost); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.Secrets(), secretsFile(t, secrets), 0o600); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(l.Dir, statedir.CredentialsDir, "."+carol+statedir.CredentialExt+atomicfile.TempInfix+"123456")
	if err := os.WriteFile(torn, []byte(`{"url":"tls://person.carol:`+secrets[carol].Password), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Credential(tok)); err != nil {
		t.Fatalf("the setup expects the token's credential still on disk: %v", err)
	}

	var synced syncLog
	o := rollout.WithSyncDir(b.Opts, synced.sync)
	res, err := rollout.Apply(controllertest.Ctx(t), m2, store.FileStoreSyncedBy(b.Dir, synced.sync), b.Dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Removed, []string{tok}) || len(res.Added) != 0 || !res.ConfigChanged || !slices.Contains(res.CredentialsWritten, carol) {
		t.Fatalf("expected the token removed, nobody minted again, carol's credential written and a new nats.conf; got %+v", res)
	}
	for _, p := range []string{l.Credential(tok), torn} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still on disk after the apply that finished the interrupted one: %v", filepath.Base(p), err)
		}
	}
	if c := b.Credential(carol); c.Password() != secrets[carol].Password {
		t.Errorf("carol's credential does not carry the secret the interrupted apply minted")
	}
	after, _ := b.St.Secrets(controllertest.Ctx(t))
	if !reflect.DeepEqual(after, secrets) {
		t.Errorf("secrets changed by the apply that finished the interrupted one")
	}
	conf, _ := os.ReadFile(l.NATSConfig())
	if bytes.Contains(conf, []byte(`"`+tok+`"`)) || !bytes.Contains(conf, []byte(secrets[carol].Hash)) {
		t.Errorf("nats.conf does not drop the token and carry carol")
	}
	credDir := filepath.Join(l.Dir, statedir.CredentialsDir)
	last := synced.entries[credDir]
	if len(last) == 0 || slices.Contains(last[len(last)-1], tok+statedir.CredentialExt) {
		t.Errorf("the credentials directory was not synced after the removal: %v", last)
	}
}

// secretsFile is secrets as the file store writes them.
func secretsFile(t *testing.T, secrets store.Secrets) []byte {
	t.Helper()
	b, err := json.MarshalIndent(secrets, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestATokensGraceGoesWithIt: a token keeps the grace it was issued with
// (store.Token.Grace), whatever grace the process composing after it was
// given: another process's composition within it keeps the spent token's
// user, and one after it drops the user.
func TestATokensGraceGoesWithIt(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	now := time.Now()
	issuing := b.Opts
	issuing.TokenGrace = time.Minute
	tok, _, err := rollout.IssueToken(ctx, b.M, b.St, b.Dir, "node-a", time.Hour, issuing)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Grace != time.Minute {
		t.Fatalf("expected the token issued with a grace of 1m, got %s", tok.Grace)
	}
	tok.Spent = now
	if err := b.St.Update(ctx, func(tx store.Tx) error { return tx.PutToken(ctx, tok) }); err != nil {
		t.Fatal(err)
	}
	composed := func(at time.Duration) bool {
		o := b.Opts
		o.SpentTokenGrace = time.Second // another process's own default
		o.Now = func() time.Time { return now.Add(at) }
		if _, err := rollout.Apply(ctx, b.M, b.St, b.Dir, o); err != nil {
			t.Fatal(err)
		}
		conf, err := os.ReadFile(statedir.Layout{Dir: b.Dir}.NATSConfig())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(conf), wire.EnrolUser(tok.ID))
	}
	if !composed(10 * time.Second) {
		t.Fatal("expected the spent token's user kept within its own grace, by a composition given a shorter one")
	}
	if composed(2 * time.Minute) {
		t.Fatal("expected the spent token's user dropped after its grace")
	}
}
