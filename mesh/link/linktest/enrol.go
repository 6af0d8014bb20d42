package linktest

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

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
