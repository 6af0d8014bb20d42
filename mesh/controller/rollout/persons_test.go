package rollout_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// issued issues a person and opens its sealed credential with its key.
func issuePerson(b *controllertest.Bed, name string, tools []string) (wire.Credential, seal.Key) {
	b.T.Helper()
	key, err := seal.NewKey()
	if err != nil {
		b.T.Fatal(err)
	}
	doc, err := rollout.IssuePerson(controllertest.Ctx(b.T), b.M, b.St, b.Dir, name, tools, seal.EncodePublic(key.Public), b.Opts)
	if err != nil {
		b.T.Fatalf("issue person %s: %v", name, err)
	}
	return openSealed(b.T, doc, key), key
}

func openSealed(t *testing.T, doc []byte, key seal.Key) wire.Credential {
	t.Helper()
	s, err := wire.ParseSealedCredential(doc)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := key.Open(s.Sealed)
	if err != nil {
		t.Fatalf("open the sealed credential of %s: %v", s.Person, err)
	}
	c, err := wire.ParseCredential(plain)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dialJudged connects as c through observe, whose client tells which
// operations the server refused.
func dialJudged(t *testing.T, c wire.Credential) *observe.Client {
	t.Helper()
	var oc *observe.Client
	controllertest.Eventually(t, 10*time.Second, c.User()+" connects", func() bool {
		// Each attempt bounded well within the deadline: one hanging on a
		// busy server would otherwise be the only attempt made.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		oc, err = observe.Dial(ctx, c, "")
		return err == nil
	})
	t.Cleanup(oc.Close)
	return oc
}

// judge has the server judge op on subjects through oc, and fails the
// test where its verdict is not want (true: refused).
func judge(t *testing.T, oc *observe.Client, who string, op observe.Op, want bool, subjects ...string) {
	t.Helper()
	refused, err := oc.TryAll(controllertest.Ctx(t), op, subjects)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subjects {
		if refused[s] != want {
			t.Errorf("%s %s %q: refused %v, expected %v", who, op, s, refused[s], want)
		}
	}
}

// TestAPersonIssuedMayCallItsToolsAndNothingElse: design 25 §7 — a
// person's user may publish the tool subjects it was issued and ask the
// catalogue; nothing on control, nodes or builds, no JetStream, no other
// tool, no inbox but its own.
func TestAPersonIssuedMayCallItsToolsAndNothingElse(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	b.Watch()
	carol, _ := issuePerson(b, "carol", []string{"sensor.calibrate"})
	if carol.Name != "carol" || strings.Join(carol.Tools, ",") != "sensor.calibrate" {
		t.Fatalf("carol's credential: %+v", carol)
	}
	v := dialJudged(t, carol)
	judge(t, v, "carol", observe.Publish, false, wire.ToolSubject("sensor", "calibrate"), wire.ToolSubject(wire.CatalogSeat, wire.CatalogTool))
	judge(t, v, "carol", observe.Publish, true,
		wire.SubjectPush, wire.SubjectBuildRequest, wire.NodeDeclare("node-a"), wire.SubjectBuilt,
		wire.ToolSubject("sensor", "reset"), "$JS.API.STREAM.INFO."+wire.StreamEvents, wire.EventSubject("sensor", "reading"))
	judge(t, v, "carol", observe.Subscribe, true, wire.SubjectNodesAll, wire.Under(wire.PersonInbox("alice")), wire.SubjectModuleEvents)

	admin, _ := issuePerson(b, "dave", store.Admin)
	if strings.Join(admin.Tools, ",") != "*" {
		t.Fatalf("an administrator's credential lists %v, expected *", admin.Tools)
	}
	va := dialJudged(t, admin)
	var declared []string
	for _, mod := range b.M.Modules {
		for _, tool := range mod.Tools {
			declared = append(declared, wire.ToolSubject(mod.Name, tool))
		}
	}
	judge(t, va, "the administrator", observe.Publish, false, declared...)
	judge(t, va, "the administrator", observe.Publish, true, wire.SubjectPush)
}

// TestARevokedPersonIsClosedByTheServer: revoke composes the person out at
// once; the server closes its open connection and refuses it a new one.
// Issued again, the person gets a new password: the old credential is
// refused.
func TestARevokedPersonIsClosedByTheServer(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	b.Watch()
	carol, _ := issuePerson(b, "carol", []string{"sensor.*"})
	closed := make(chan struct{})
	var nc *nats.Conn
	controllertest.Eventually(t, 10*time.Second, "carol connects", func() bool {
		var err error
		nc, err = link.Dial(controllertest.Ctx(t), carol, link.WithNATSOptions(nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) })))
		return err == nil
	})
	defer nc.Close()
	if err := rollout.RevokePerson(controllertest.Ctx(t), b.M, b.St, b.Dir, "carol", b.Opts); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("carol's connection was not closed within 10 s of her revocation")
	}
	if _, err := controllertest.DialWith(carol); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("a revoked person connecting: expected an authorization refusal, got %v", err)
	}
	if _, err := b.St.Credential(controllertest.Ctx(t), wire.PersonUser("carol")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a revoked person's credential is still in the store: %v", err)
	}

	again, _ := issuePerson(b, "carol", []string{"sensor.calibrate"})
	controllertest.DialEventually(t, again).Close()
	if _, err := controllertest.DialWith(carol); err == nil {
		t.Error("the credential issued before carol was issued again still connects")
	}
}

// TestBadPersonsAreRefusedNamingWhat: each refusal names what was wrong,
// and nothing is issued.
func TestBadPersonsAreRefusedNamingWhat(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	key, _ := seal.NewKey()
	pub := seal.EncodePublic(key.Public)
	for _, c := range []struct {
		name  string
		tools []string
		key   string
		want  string
	}{
		{"carol", []string{"sensor.nope"}, pub, `does not serve tool "nope"`},
		{"carol", []string{"nobody.calibrate"}, pub, `unknown module or seat "nobody"`},
		{"carol", nil, pub, "no tools"},
		{"carol", []string{"sensor.calibrate"}, "not-a-key", "sealing key"},
		{"alice", []string{"sensor.calibrate"}, pub, "is in the mesh description"},
		{"Carol!", []string{"sensor.calibrate"}, pub, "name"},
	} {
		_, err := rollout.IssuePerson(controllertest.Ctx(t), b.M, b.St, b.Dir, c.name, c.tools, c.key, b.Opts)
		if !errors.Is(err, rollout.ErrPerson) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("issue %s %v: expected ErrPerson saying %q, got %v", c.name, c.tools, c.want, err)
		}
	}
	if ps, err := b.St.Persons(controllertest.Ctx(t)); err != nil || len(ps) != 0 {
		t.Fatalf("refused persons were kept: %+v, %v", ps, err)
	}
	for name, want := range map[string]string{"nobody": "no person", "alice": "is in the mesh description"} {
		if err := rollout.RevokePerson(controllertest.Ctx(t), b.M, b.St, b.Dir, name, b.Opts); !errors.Is(err, rollout.ErrPerson) || !strings.Contains(err.Error(), want) {
			t.Errorf("revoke %s: expected ErrPerson saying %q, got %v", name, want, err)
		}
	}
}

// TestADescriptionThePersonsNoLongerFitIsRefused: a push (or apply) that
// takes away a tool a person issued may call is refused whole, naming
// the person, and changes nothing.
func TestADescriptionThePersonsNoLongerFitIsRefused(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	issuePerson(b, "carol", []string{"sensor.calibrate"})
	before, err := b.St.Secrets(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	changed := *b.M
	changed.Modules = nil
	for _, mod := range b.M.Modules {
		if mod.Name == "sensor" {
			mod.Tools, mod.ToolDocs = nil, nil
		}
		changed.Modules = append(changed.Modules, mod)
	}
	changed.Persons = []meshdesc.Person{{Name: "bob", Tools: store.Admin}}
	_, err = rollout.Apply(controllertest.Ctx(t), &changed, b.St, b.Dir, b.Opts)
	if err == nil || !strings.Contains(err.Error(), "carol") || !strings.Contains(err.Error(), "calibrate") {
		t.Fatalf("a description without the tool carol may call: expected a refusal naming carol and the tool, got %v", err)
	}
	after, _ := b.St.Secrets(controllertest.Ctx(t))
	if len(after) != len(before) {
		t.Errorf("the refused apply changed the secrets: %d users before, %d after", len(before), len(after))
	}
}

// killedStore commits every Update, and the kill-th one (from 1) is the
// controller killed right after it committed: its caller sees an error
// and does nothing more.
type killedStore struct {
	store.Store
	kill, n int
}

var errKilled = errors.New("killed after the update committed")

func (s *killedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.Store.Update(ctx, fn); err != nil {
		return err
	}
	if s.n++; s.n == s.kill {
		return errKilled
	}
	return nil
}

// composedUser reports whether user is in dir's nats.conf.
func composedUser(t *testing.T, dir, user string) bool {
	t.Helper()
	users, err := rollout.ComposedUsers(statedir.Layout{Dir: dir}.NATSConfig())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(users, user)
}

// TestAnInterruptedRevokeIsFinishedByRunningItAgain: issue 18 §4 — a
// revoke killed after any of its store updates leaves the person's user
// composed (its connection live); running the revoke again finishes it:
// the user is composed out and the server closes the connection. A
// revoke that returned nil is done.
func TestAnInterruptedRevokeIsFinishedByRunningItAgain(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	b.Watch()
	for kill := 1; ; kill++ {
		carol, _ := issuePerson(b, "carol", []string{"sensor.calibrate"})
		closed := make(chan struct{})
		var nc *nats.Conn
		controllertest.Eventually(t, 10*time.Second, "carol connects", func() bool {
			var err error
			nc, err = link.Dial(controllertest.Ctx(t), carol, link.WithNATSOptions(nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) })))
			return err == nil
		})
		st := &killedStore{Store: b.St, kill: kill}
		err := rollout.RevokePerson(controllertest.Ctx(t), b.M, st, b.Dir, "carol", b.Opts)
		if err == nil {
			// Not killed: the revoke made fewer updates than kill.
			if composedUser(t, b.Dir, wire.PersonUser("carol")) {
				t.Fatal("a revoke that said it was done left carol's user composed")
			}
			nc.Close()
			if kill == 1 {
				t.Fatal("the revoke made no store update")
			}
			return
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("kill after update %d: %v", kill, err)
		}
		if !composedUser(t, b.Dir, wire.PersonUser("carol")) {
			// Killed after its composition was written: nothing left to finish.
			nc.Close()
			continue
		}
		if err := rollout.RevokePerson(controllertest.Ctx(t), b.M, b.St, b.Dir, "carol", b.Opts); err != nil {
			t.Fatalf("revoke again after a kill after update %d: %v", kill, err)
		}
		if composedUser(t, b.Dir, wire.PersonUser("carol")) {
			t.Fatalf("revoked again after a kill after update %d, carol's user is still composed", kill)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("kill after update %d: carol's connection was not closed within 10 s of the revoke run again", kill)
		}
		if err := rollout.RevokePerson(controllertest.Ctx(t), b.M, b.St, b.Dir, "carol", b.Opts); !errors.Is(err, rollout.ErrPerson) || !strings.Contains(err.Error(), "no person") {
			t.Fatalf("a third revoke, of a person revoked: expected ErrPerson saying no person, got %v", err)
		}
	}
}
