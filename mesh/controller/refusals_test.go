package controller

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestRefusedControlMessagesAreCountedInTheStore: a push whose
// description fails validation, an enrolment request that does not read,
// a claim with the wrong proof and a report from a node that is not
// enrolled are each refused, counted under its kind in the store with its
// reason (what status shows), and the loop goes on: a good claim after
// them enrols.
func TestRefusedControlMessagesAreCountedInTheStore(t *testing.T) {
	l := newLiving(t)
	ctx := ctxT(t)
	publish := func(nc *nats.Conn, subject string, data []byte) {
		t.Helper()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subject, data); err != nil {
			t.Fatalf("publish on %s: %v", subject, err)
		}
	}
	ctl := dialEventually(t, l.credential(wire.ControllerUser))
	bad := strings.Replace(mustYAML(t, l.m), "name: sensor", "name: Sensor!", 1)
	publish(ctl, wire.SubjectPush, []byte(`{"mesh":"`+strings.ReplaceAll(bad, "\n", `\n`)+`"}`))

	token := l.issue("node-a")
	tc := dialEventually(t, token)
	// The enrolment account has no JetStream: its requests are answered
	// by CONTROL's PubAck through the service import.
	if _, err := tc.Request(wire.SubjectEnrol, []byte(`{"token":"`+token.Name+`"}`), 5*time.Second); err != nil {
		t.Fatalf("an unreadable enrolment request not taken: %v", err)
	}
	key, _ := seal.NewKey()
	wrong := wire.EnrolRequest{Token: token.Name, Proof: "not-the-secret", SealingKey: seal.EncodePublic(key.Public), Reply: wire.EnrolInbox(token.Name) + ".r"}
	if _, err := tc.Request(wire.SubjectEnrol, wrong.Marshal(), 5*time.Second); err != nil {
		t.Fatalf("a claim with the wrong proof not taken: %v", err)
	}
	tc.Close()

	stranger := wire.Report{Kind: wire.KindReport, Node: "node-b", ID: "r-stranger", At: time.Now(), Applied: 1}
	publish(dialEventually(t, l.credential(wire.HostUser("node-b"))), wire.NodeReport("node-b"), stranger.Marshal())

	want := map[string]int{RefusedPush: 1, RefusedEnrolment: 2, RefusedReport: 1}
	var got Refusals
	eventually(t, 10*time.Second, "four refusals counted", func() bool {
		got, _ = l.st.Refusals(ctx)
		return got.Total() == 4
	})
	for kind, n := range want {
		if got.Counts[kind] != n {
			t.Errorf("expected %d %s refusal(s), got %d (%+v)", n, kind, got.Counts[kind], got.Counts)
		}
	}
	reasons := ""
	for _, x := range got.Last {
		reasons += x.Kind + ": " + x.Reason + "\n"
	}
	for _, says := range []string{"push: " + ErrBadControl.Error(), "Sensor!", "enrolment: " + ErrBadControl.Error(), "the proof is not token " + token.Name + "'s", "report: " + ErrBadControl.Error()} {
		if !strings.Contains(reasons, says) {
			t.Errorf("expected a refusal saying %q, got:\n%s", says, reasons)
		}
	}
	// The loop counts a message once it is settled, a moment after the
	// store counted its refusal.
	eventually(t, 5*time.Second, "three terminated and one claim refused", func() bool {
		c := l.loop.Counts()
		return c.Terminated == 3 && c.Refused == 1
	})
	if _, _, err := enrolWith(t, token); err != nil {
		t.Fatalf("the loop did not go on: a good claim after the refusals: %v", err)
	}
}

// TestARefusalIsCountedOnce: the same message refused again (a
// redelivery, its termination lost) is not counted again.
func TestARefusalIsCountedOnce(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	ctx := context.Background()
	x := Refusal{Kind: RefusedPush, Key: LedgerKey(wire.SubjectPush, "", 9), At: time.Now(), Reason: "bad"}
	for i, want := range []bool{true, false} {
		counted, err := RecordRefusal(ctx, b.st, x)
		if err != nil || counted != want {
			t.Fatalf("record %d: expected counted %v, got %v (%v)", i+1, want, counted, err)
		}
	}
	if r, _ := b.st.Refusals(ctx); r.Total() != 1 || len(r.Last) != 1 {
		t.Fatalf("expected one refusal, got %+v", r)
	}
}

// TestRefusalsKeepTheNewestAndCountAll: past MaxRefusalsKept the oldest
// are dropped from the list, never from the counts.
func TestRefusalsKeepTheNewestAndCountAll(t *testing.T) {
	var r Refusals
	for i := range MaxRefusalsKept + 7 {
		r = r.with(Refusal{Kind: RefusedOther, Key: LedgerKey("x", "", uint64(i+1))})
	}
	if r.Total() != MaxRefusalsKept+7 || len(r.Last) != MaxRefusalsKept || r.Last[0].Key != "seq:8" {
		t.Fatalf("expected %d counted, the newest %d kept from seq:8, got %d counted, %d kept from %s", MaxRefusalsKept+7, MaxRefusalsKept, r.Total(), len(r.Last), r.Last[0].Key)
	}
	r = r.with(Refusal{Kind: RefusedOther, Key: "seq:99", Reason: strings.Repeat("é", maxReason)})
	if got := r.Last[len(r.Last)-1].Reason; len(got) > maxReason+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("expected a long reason cut to %d bytes of valid UTF-8 and marked, got %d bytes", maxReason, len(got))
	}
}
