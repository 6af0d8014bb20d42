package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
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
	ctx := controllertest.Ctx(t)
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
	ctl := controllertest.DialEventually(t, l.Credential(wire.ControllerUser))
	bad := strings.Replace(mustYAML(t, l.M), "name: sensor", "name: Sensor!", 1)
	publish(ctl, wire.SubjectPush, []byte(`{"mesh":"`+strings.ReplaceAll(bad, "\n", `\n`)+`"}`))

	token := l.Issue("node-a")
	tc := controllertest.DialEventually(t, token)
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
	publish(controllertest.DialEventually(t, l.Credential(wire.HostUser("node-b"))), wire.NodeReport("node-b"), stranger.Marshal())

	want := map[string]int{store.RefusedPush: 1, store.RefusedEnrolment: 2, store.RefusedReport: 1}
	var got store.Refusals
	controllertest.Eventually(t, 10*time.Second, "four refusals counted", func() bool {
		got, _ = l.St.Refusals(ctx)
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
	for _, says := range []string{"push: " + rollout.ErrBadControl.Error(), "Sensor!", "enrolment: " + rollout.ErrBadControl.Error(), "the proof is not token " + token.Name + "'s", "report: " + rollout.ErrBadControl.Error()} {
		if !strings.Contains(reasons, says) {
			t.Errorf("expected a refusal saying %q, got:\n%s", says, reasons)
		}
	}
	// The loop counts a message once it is settled, a moment after the
	// store counted its refusal.
	controllertest.Eventually(t, 5*time.Second, "three terminated and one claim refused", func() bool {
		c := l.loop.Counts()
		return c.Terminated == 3 && c.Refused == 1
	})
	if _, _, err := controllertest.EnrolWith(t, token); err != nil {
		t.Fatalf("the loop did not go on: a good claim after the refusals: %v", err)
	}
}

// TestARefusalIsCountedOnce: the same message refused again (a
// redelivery, its termination lost) is not counted again.
func TestARefusalIsCountedOnce(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	ctx := context.Background()
	x := store.Refusal{Kind: store.RefusedPush, Key: store.LedgerKey(wire.SubjectPush, "", 9), At: time.Now(), Reason: "bad"}
	for i, want := range []bool{true, false} {
		counted, err := RecordRefusal(ctx, b.St, x)
		if err != nil || counted != want {
			t.Fatalf("record %d: expected counted %v, got %v (%v)", i+1, want, counted, err)
		}
	}
	if r, _ := b.St.Refusals(ctx); r.Total() != 1 || len(r.Last) != 1 {
		t.Fatalf("expected one refusal, got %+v", r)
	}
}
