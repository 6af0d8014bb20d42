package linktest

import (
	"bytes"
	"encoding/json"
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

// buildOneAtATime: a build request is taken by one builder; another does
// not get it while the first lives; when the first dies before acking,
// the other gets it; once acked, it does not come again.
func buildOneAtATime(t *testing.T, bus Bus) {
	c := bus.Controller()
	ctx := ctxT(t)
	id1, body1 := buildRequest(t, "r1")
	if err := c.RequestBuild(ctx, id1, body1); err != nil {
		t.Fatalf("expected build %s requested, got %v", id1, err)
	}
	take := func(b Builder, wait time.Duration, want string, body []byte) Taken {
		t.Helper()
		got, ok, err := b.Take(ctx, wait)
		if err != nil || !ok {
			t.Fatalf("expected build %s taken within %v, got none (%v)", want, wait, err)
		}
		if got.ID != want || !bytes.Equal(got.Body, body) {
			t.Fatalf("expected build %s with its body, got %s: %q", want, got.ID, got.Body)
		}
		return got
	}
	first := bus.Builder()
	take(first, 10*time.Second, id1, body1)
	second := bus.Builder()
	if got, ok, err := second.Take(ctx, 2*time.Second); err != nil || ok {
		t.Fatalf("expected build %s the first builder's while it lives, got the second taking %q (%v)", id1, got.ID, err)
	}
	first.Die()
	again := take(second, 30*time.Second, id1, body1)
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("expected build %s acked, got %v", id1, err)
	}
	id2, body2 := buildRequest(t, "r2")
	if err := c.RequestBuild(ctx, id2, body2); err != nil {
		t.Fatalf("expected build %s requested, got %v", id2, err)
	}
	if err := take(second, 10*time.Second, id2, body2).Ack(ctx); err != nil {
		t.Fatalf("expected build %s acked, got %v", id2, err)
	}
}

// heldEnrolmentAnswered: an enrolment request held by the controller (its
// store away) is answered later on the reply its payload named, and the
// Enroller waiting since its first send takes the answer.
func heldEnrolmentAnswered(t *testing.T, bus Bus) {
	en, ok := bus.(Enrolling)
	if !ok {
		t.Skip("the bus cannot issue an enrolment token live (capability linktest.Enrolling)")
	}
	const delay = 500 * time.Millisecond
	e, token := en.Enroller()
	c := bus.Controller()
	ctx := ctxT(t)
	answer := wire.EnrolAnswer{Node: "node-new", Sealed: []byte("sealed")}.Marshal()
	replies := make(chan string, 16)
	type result struct {
		answer []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		got, err := e.Enrol(ctx, func(reply string) []byte {
			replies <- reply
			return wire.EnrolRequest{Token: token, Proof: "proof", SealingKey: "key", Reply: reply}.Marshal()
		})
		done <- result{got, err}
	}()
	ch := consume(t, c, 4, func(m plane.ControlMsg, d *delivery) error {
		if m.Subject() != wire.SubjectEnrol {
			return m.Ack(ctx)
		}
		if m.Attempt() == 1 {
			d.HeldAt = time.Now()
			return m.Hold(delay)
		}
		req, err := wire.ParseEnrolRequest(m.Data())
		if err != nil {
			_ = m.Term(err.Error())
			return err
		}
		if err := c.Answer(ctx, req.Reply, answer); err != nil {
			return err
		}
		return m.Ack(ctx)
	})
	var held, answered bool
	deadline := time.Now().Add(20 * time.Second)
	for !answered {
		d := nextBy(t, ch, deadline, "the enrolment request answered")
		if d.Subject != wire.SubjectEnrol {
			t.Fatalf("expected the request on %s, got %s", wire.SubjectEnrol, d.Subject)
		}
		held = held || !d.HeldAt.IsZero()
		answered = d.Attempt > 1
	}
	if !held {
		t.Fatal("expected the request held before it was answered, got it answered at once")
	}
	select {
	case r := <-done:
		if r.err != nil || !bytes.Equal(r.answer, answer) {
			t.Fatalf("expected the answer %q, got %q (%v)", answer, r.answer, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("expected the enrolment answered within 20s, got no answer")
	}
	reply := <-replies
	// The token's own inbox or queue, as the bus the controller answers
	// on accepts it: the answer carries a credential.
	if err := c.CheckEnrolReply(token, reply); err != nil {
		t.Fatalf("expected a reply of token %s's own, got %v", token, err)
	}
}
