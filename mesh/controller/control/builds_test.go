package control

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// announce publishes a repository's announcement as that repository's
// own user, as the stand-in does, and returns CONTROL's acknowledgement.
func (l *living) announce(t *testing.T, repo, module, revision string) *jetstream.PubAck {
	t.Helper()
	cred := l.Credential(wire.SourceUser(repo))
	nc := controllertest.DialEventually(t, cred)
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := wire.SourceChange{Repo: repo, Module: module, Revision: revision, At: time.Now()}
	ack, err := js.Publish(controllertest.Ctx(t), wire.SourceChanged(repo), wire.Marshal(c), jetstream.WithMsgID(announcementID(cred, wire.BuildID(repo, module, revision))))
	if err != nil {
		t.Fatalf("announce %s@%s: %v", module, revision, err)
	}
	return ack
}

// announcementID and outcomeID are the message ids the stand-in and the
// builder give an announcement and an outcome, each with its own
// credential.
func announcementID(c wire.Credential, build string) string {
	return wire.SourceChangeMsgID(c.Password(), build)
}

func outcomeID(c wire.Credential, build string) string { return wire.BuiltMsgID(c.Password(), build) }

// TestASourceChangeReachesTheBuilderAndItsOutcomeIsRecordedOnce: design
// 25 §9 step 4 — the repository's announcement becomes one build request
// on BUILDS, taken through the builder's own consumer; its outcome,
// published twice (a builder killed after it said), is recorded once; an
// announcement of the same revision again asks nothing more; an outcome
// of a build nobody asked for is refused and counted.
func TestASourceChangeReachesTheBuilderAndItsOutcomeIsRecordedOnce(t *testing.T) {
	l := newLiving(t)
	ctx := controllertest.Ctx(t)
	l.announce(t, "modules", "sensor", "r2")
	l.announce(t, "modules", "sensor", "r2") // announced twice: one build

	bc := l.Credential(wire.BuilderUser)
	nc, err := link.Dial(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, wire.StreamBuilds, wire.BuildsConsumer)
	if err != nil {
		t.Fatalf("the builder binds its consumer: %v", err)
	}
	if info := cons.CachedInfo(); info.Config.MaxAckPending != 1 {
		t.Errorf("the builders' consumer lets %d builds out at once, want 1", info.Config.MaxAckPending)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var reqs []wire.BuildRequest
	for msg := range batch.Messages() {
		r, err := wire.ParseBuildRequest(msg.Data())
		if err != nil {
			t.Fatalf("a build request on BUILDS: %v", err)
		}
		reqs = append(reqs, r)
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(reqs) != 1 || reqs[0].ID != wire.BuildID("modules", "sensor", "r2") {
		t.Fatalf("expected one request for modules/sensor@r2, got %+v", reqs)
	}
	out := wire.Built{ID: reqs[0].ID, Repo: "modules", Module: "sensor", Revision: "r2", Outcome: wire.BuildSucceeded,
		Digest: wire.Digest([]byte("artifact")), Size: 8, Chunks: 1, Builder: "b1", At: time.Now()}
	for range 2 {
		if _, err := js.Publish(ctx, wire.SubjectBuilt, wire.Marshal(out), jetstream.WithMsgID(outcomeID(bc, out.ID))); err != nil {
			t.Fatal(err)
		}
	}
	var builds []store.Build
	controllertest.Eventually(t, 10*time.Second, "the outcome recorded", func() bool {
		builds, _ = l.St.Builds(ctx)
		return len(builds) == 1 && builds[0].Outcome == wire.BuildSucceeded
	})
	if b := builds[0]; b.Digest != out.Digest || b.Builder != "b1" || b.Revision != "r2" || b.Asked.IsZero() {
		t.Errorf("the build recorded: %+v", b)
	}
	// A second outcome of the same build, under another message id (a
	// builder that built it again), changes nothing.
	again := out
	again.Digest, again.Builder = wire.Digest([]byte("other")), "b2"
	if _, err := js.Publish(ctx, wire.SubjectBuilt, wire.Marshal(again)); err != nil {
		t.Fatal(err)
	}
	stranger := out
	stranger.ID, stranger.Revision = wire.BuildID("modules", "sensor", "r9"), "r9"
	if _, err := js.Publish(ctx, wire.SubjectBuilt, wire.Marshal(stranger)); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 10*time.Second, "the unasked outcome refused", func() bool {
		r, _ := l.St.Refusals(ctx)
		return r.Counts[store.RefusedBuild] == 1
	})
	builds, _ = l.St.Builds(ctx)
	if len(builds) != 1 || builds[0].Digest != out.Digest || builds[0].Builder != "b1" {
		t.Fatalf("a second outcome changed the record: %+v", builds)
	}
	r, _ := l.St.Refusals(ctx)
	if !strings.Contains(r.Last[len(r.Last)-1].Reason, "never asked for") {
		t.Errorf("the refusal says %q", r.Last[len(r.Last)-1].Reason)
	}
	l.announce(t, "modules", "sensor", "r2")
	if msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second)); err == nil {
		_ = msg.Ack()
		t.Error("a revision already built was asked again")
	}
}

// TestBadAnnouncementsAreRefusedNamingWhat: a repository or module the
// description does not have is refused and counted, asking nothing.
func TestBadAnnouncementsAreRefusedNamingWhat(t *testing.T) {
	l := newLiving(t)
	ctx := controllertest.Ctx(t)
	l.announce(t, "modules", "nobody", "r1")
	controllertest.Eventually(t, 10*time.Second, "the announcement refused", func() bool {
		r, _ := l.St.Refusals(ctx)
		return r.Counts[store.RefusedBuild] == 1
	})
	r, _ := l.St.Refusals(ctx)
	if !strings.Contains(r.Last[0].Reason, `module "nobody"`) {
		t.Errorf("the refusal says %q", r.Last[0].Reason)
	}
	if b, _ := l.St.Builds(ctx); len(b) != 0 {
		t.Errorf("a refused announcement asked for %+v", b)
	}
	if _, _, err := AskBuild(ctx, l.St, l.M, "k", wire.SourceChanged("other"), wire.Marshal(wire.SourceChange{Repo: "other", Module: "sensor", Revision: "r1"}), l.Opts); !errors.Is(err, rollout.ErrBadControl) || !strings.Contains(err.Error(), "not a source") {
		t.Errorf("a repository the description lacks: %v", err)
	}
	if _, _, err := AskBuild(ctx, l.St, l.M, "k", wire.SourceChanged("modules"), wire.Marshal(wire.SourceChange{Repo: "other", Module: "sensor", Revision: "r1"}), l.Opts); !errors.Is(err, rollout.ErrBadControl) || !strings.Contains(err.Error(), "not its subject") {
		t.Errorf("an announcement on another repository's subject: %v", err)
	}
}

// TestAPushInstallsOnlyAnArtifactABuildProduced: a module may be given
// an artifact a build of it produced, and no other; the push refused
// says what was built.
func TestAPushInstallsOnlyAnArtifactABuildProduced(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := controllertest.Ctx(t)
	digest := wire.Digest([]byte("sensor at r2"))
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		return tx.PutBuild(ctx, store.Build{ID: wire.BuildID("modules", "sensor", "r2"), Repo: "modules", Module: "sensor", Revision: "r2",
			Asked: time.Now(), Outcome: wire.BuildSucceeded, Digest: digest, Size: 12, Chunks: 1})
	}); err != nil {
		t.Fatal(err)
	}
	m := *b.M
	m.Modules = append(m.Modules[:0:0], b.M.Modules...)
	for i := range m.Modules {
		if m.Modules[i].Name == "mesh-catalog" {
			m.Modules[i].Artifact = digest
		}
	}
	_, err := rollout.Apply(ctx, &m, b.St, b.Dir, b.Opts)
	if !errors.Is(err, rollout.ErrUnfit) || !strings.Contains(err.Error(), "no build of mesh-catalog produced it (built: none)") {
		t.Fatalf("an artifact of another module: expected ErrUnfit saying so, got %v", err)
	}
	for i := range m.Modules {
		m.Modules[i].Artifact = ""
		if m.Modules[i].Name == "sensor" {
			m.Modules[i].Artifact = digest
		}
	}
	if _, err := rollout.Apply(ctx, &m, b.St, b.Dir, b.Opts); err != nil {
		t.Fatalf("the artifact a build of sensor produced: %v", err)
	}
	var decls []wire.Declaration
	if err := b.St.Update(ctx, func(tx store.Tx) error {
		var err error
		decls, _, err = rollout.Declare(ctx, tx, &m)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if a := decls[0].Artifacts["sensor"]; decls[0].Node != "node-a" || a.Digest != digest || a.Size != 12 {
		t.Fatalf("node-a's declaration: %+v", decls[0])
	}
}

// TestAHostCannotPreEmptABuildsMessageIDs: issue 18 §3 — CONTROL
// deduplicates message ids across all its subjects, so a host that
// reported first with a build's announcement or outcome id had the real
// one dropped as its duplicate: the revision never built, or "not built
// yet" for good. A host publishing every id it can derive (the build's
// own, keyed with nothing, keyed with its own password) leaves the
// announcement and the outcome stored and taken, and each still a
// duplicate of itself sent again.
func TestAHostCannotPreEmptABuildsMessageIDs(t *testing.T) {
	l := newLiving(t)
	ctx := controllertest.Ctx(t)
	build := wire.BuildID("modules", "sensor", "r2")
	hc := l.Credential(wire.HostUser("node-a"))
	host := controllertest.DialEventually(t, hc)
	hjs, err := jetstream.New(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"changed:" + build, "built:" + build, build,
		announcementID(hc, build), outcomeID(hc, build),
		wire.SourceChangeMsgID("", build), wire.BuiltMsgID("", build),
	} {
		if _, err := hjs.Publish(ctx, wire.NodeReport("node-a"), []byte(`{}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatalf("the host's report with id %q: %v", id, err)
		}
	}

	if ack := l.announce(t, "modules", "sensor", "r2"); ack.Duplicate {
		t.Fatal("the repository's announcement was dropped as a duplicate of the host's report")
	}
	if ack := l.announce(t, "modules", "sensor", "r2"); !ack.Duplicate {
		t.Error("the same announcement sent again was stored again: the retry dedup is gone")
	}
	bc := l.Credential(wire.BuilderUser)
	nc := controllertest.DialEventually(t, bc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, wire.StreamBuilds, wire.BuildsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := controllertest.NextWithin(cons, 10*time.Second)
	if err != nil {
		t.Fatalf("the announcement did not become a build request: %v", err)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	out := wire.Built{ID: build, Repo: "modules", Module: "sensor", Revision: "r2", Outcome: wire.BuildSucceeded,
		Digest: wire.Digest([]byte("artifact")), Size: 8, Chunks: 1, Builder: "b1", At: time.Now()}
	for i, want := range []bool{false, true} {
		ack, err := js.Publish(ctx, wire.SubjectBuilt, wire.Marshal(out), jetstream.WithMsgID(outcomeID(bc, out.ID)))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != want {
			t.Fatalf("the outcome sent %d time(s): duplicate %v, want %v", i+1, ack.Duplicate, want)
		}
	}
	controllertest.Eventually(t, 10*time.Second, "the outcome recorded", func() bool {
		builds, _ := l.St.Builds(ctx)
		return len(builds) == 1 && builds[0].Outcome == wire.BuildSucceeded
	})
}
