package linktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// buildRequest is a build request's id and body as the controller sends
// it.
func buildRequest(t *testing.T, revision string) (id string, body []byte) {
	t.Helper()
	r := wire.BuildRequest{Repo: "modules", Module: "sensor", Revision: revision, Asked: time.Now().UTC()}
	r.ID = wire.BuildID(r.Repo, r.Module, r.Revision)
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID, body
}

// requestBuild asks for the build of revision, as the controller does.
func requestBuild(t *testing.T, bus Bus, revision string) (id string, body []byte) {
	t.Helper()
	id, body = buildRequest(t, revision)
	if err := bus.Controller().RequestBuild(ctxT(t), id, body); err != nil {
		t.Fatalf("expected build %s requested, got %v", id, err)
	}
	return id, body
}

// tryTake is the build request b takes within wait, nil if none came.
func tryTake(t *testing.T, b plane.Builder, wait time.Duration) plane.BuildMsg {
	t.Helper()
	ctx, cancel := timeout(t, wait)
	defer cancel()
	for {
		m, err := b.NextBuild(ctx)
		if errors.Is(err, plane.ErrMissing) && ctx.Err() == nil {
			time.Sleep(poll) // the queue not there yet: a builder waits
			continue
		}
		if err != nil {
			t.Fatalf("expected a build request or none, got %v", err)
		}
		return m
	}
}

// take is the build request b takes within wait, which must be want's.
func take(t *testing.T, b plane.Builder, wait time.Duration, want string, body []byte) plane.BuildMsg {
	t.Helper()
	m := tryTake(t, b, wait)
	if m == nil {
		t.Fatalf("expected build %s taken within %v, got none", want, wait)
	}
	if m.ID() != want || !bytes.Equal(m.Data(), body) {
		t.Fatalf("expected build %s with its body, got %s: %q", want, m.ID(), m.Data())
	}
	return m
}

// buildOneAtATime: a build request is taken by one builder; another does
// not get it while the first lives, however long it holds it unsettled;
// when the first dies before acking, the other gets it; once acked, it
// does not come again.
func buildOneAtATime(t *testing.T, bus Bus) {
	ctx := ctxT(t)
	id1, body1 := requestBuild(t, bus, "r1")
	first := bus.Builder()
	take(t, first, 10*time.Second, id1, body1)
	second := bus.Builder()
	if m := tryTake(t, second, 2*time.Second); m != nil {
		t.Fatalf("expected build %s the first builder's while it lives, got the second taking %q", id1, m.ID())
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close the first builder: %v", err)
	}
	again := take(t, second, 30*time.Second, id1, body1)
	if again.Attempt() < 2 {
		t.Fatalf("expected build %s's second delivery, got attempt %d", id1, again.Attempt())
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("expected build %s acked, got %v", id1, err)
	}
	id2, body2 := requestBuild(t, bus, "r2")
	if err := take(t, second, 10*time.Second, id2, body2).Ack(ctx); err != nil {
		t.Fatalf("expected build %s acked, got %v", id2, err)
	}
	if m := tryTake(t, second, 2*time.Second); m != nil {
		t.Fatalf("expected nothing after the acked builds, got %s (attempt %d)", m.ID(), m.Attempt())
	}
}

// buildHeldAndTerminated: a request a builder gives back with a delay
// comes again no sooner, as its next attempt; one it terminates does not
// come again, and the requests behind it still do.
func buildHeldAndTerminated(t *testing.T, bus Bus) {
	const delay = time.Second
	ctx := ctxT(t)
	id1, body1 := requestBuild(t, bus, "r1")
	b := bus.Builder()
	m := take(t, b, 10*time.Second, id1, body1)
	held := time.Now()
	if err := m.Hold(delay); err != nil {
		t.Fatalf("hold build %s: %v", id1, err)
	}
	again := take(t, b, 20*time.Second, id1, body1)
	if took := time.Since(held); took < delay {
		t.Fatalf("expected build %s again no sooner than %v, got it after %v", id1, delay, took)
	}
	if again.Attempt() != m.Attempt()+1 {
		t.Fatalf("expected build %s's attempt %d, got %d", id1, m.Attempt()+1, again.Attempt())
	}
	if err := again.Term("not a build of ours"); err != nil {
		t.Fatalf("terminate build %s: %v", id1, err)
	}
	id2, body2 := requestBuild(t, bus, "r2")
	if err := take(t, b, 10*time.Second, id2, body2).Ack(ctx); err != nil {
		t.Fatalf("expected build %s acked, got %v", id2, err)
	}
	if m := tryTake(t, bus.Builder(), 2*time.Second); m != nil {
		t.Fatalf("expected build %s gone once terminated, got %s (attempt %d)", id1, m.ID(), m.Attempt())
	}
}

// outcomeAndAnnouncement: a build's outcome the builder sends and a
// repository's announcement reach the controller's CONTROL consumer on
// their subjects, with their message ids and bodies.
func outcomeAndAnnouncement(t *testing.T, bus Bus) {
	ctx := ctxT(t)
	id, _ := buildRequest(t, "r1")
	built := wire.Marshal(wire.Built{ID: id, Repo: "modules", Module: "sensor", Revision: "r1", Builder: "linktest", Outcome: wire.BuildFailed, Error: "no toolchain", At: time.Now().UTC()})
	builtID := wire.BuiltMsgID("key", id)
	if err := bus.Builder().Built(ctx, builtID, built); err != nil {
		t.Fatalf("expected the outcome of %s taken, got %v", id, err)
	}
	src, repo := bus.Source()
	change := wire.Marshal(wire.SourceChange{Repo: repo, Module: "sensor", Revision: "r1", At: time.Now().UTC()})
	changeID := wire.SourceChangeMsgID("key", wire.BuildID(repo, "sensor", "r1"))
	if err := src.Announce(ctx, repo, changeID, change); err != nil {
		t.Fatalf("expected the announcement of %s taken, got %v", repo, err)
	}
	want := map[string]delivery{
		wire.SubjectBuilt:        {ID: builtID, Data: built},
		wire.SourceChanged(repo): {ID: changeID, Data: change},
	}
	ch := consume(t, bus.Controller(), 4, ackAll(ctx))
	deadline := time.Now().Add(20 * time.Second)
	for len(want) > 0 {
		d := nextBy(t, ch, deadline, "the outcome and the announcement in CONTROL")
		w, ok := want[d.Subject]
		if !ok {
			t.Fatalf("expected only the outcome and the announcement, got %s on %s", d.ID, d.Subject)
		}
		if d.ID != w.ID || !bytes.Equal(d.Data, w.Data) {
			t.Fatalf("expected %s with id %s and its body, got id %s: %q", d.Subject, w.ID, d.ID, d.Data)
		}
		delete(want, d.Subject)
	}
}
