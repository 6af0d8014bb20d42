package natsplane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// planeServer is an in-process JetStream server with CONTROL and NODES as
// the controller makes them, and a host's side on a connection to it (no
// accounts: what the grants allow is the controller's tests' concern).
func planeServer(t *testing.T) (*host, jetstream.JetStream) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	admin, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: wire.StreamControl, Subjects: wire.StreamSubjects(wire.StreamControl), Duplicates: time.Minute},
		{Name: wire.StreamNodes, Subjects: wire.StreamSubjects(wire.StreamNodes), MaxMsgsPerSubject: 1, AllowDirect: true},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, js
}

// TestNewestIsTheLastDeclarationWithTheServersSequence: nothing declared
// is ErrNoDeclaration; a declaration is returned as stored, unchecked,
// at the sequence NODES keeps it.
func TestNewestIsTheLastDeclarationWithTheServersSequence(t *testing.T) {
	h, js := planeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.Newest(ctx, "node-a"); !errors.Is(err, plane.ErrNoDeclaration) {
		t.Fatalf("expected ErrNoDeclaration before any declaration, got %v", err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var ack *jetstream.PubAck
	for rev := range uint64(2) {
		body, sig, err := wire.SignDeclaration(key, wire.Declaration{Node: "node-a", Revision: rev + 1})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(wire.NodeDeclare("node-a"))
		msg.Data = body
		msg.Header.Set(wire.HeaderSignature, sig)
		if ack, err = js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.Newest(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	d, err := wire.VerifyDeclaration(key.Public().(ed25519.PublicKey), wire.NodeDeclare("node-a"), got.Body, got.Signature)
	if err != nil || d.Revision != 2 {
		t.Fatalf("expected revision 2, signed, got %+v (%v)", d, err)
	}
	if got.Position != ack.Sequence || got.Where != "NODES sequence 2" {
		t.Fatalf("expected NODES sequence %d, got %d, %q", ack.Sequence, got.Position, got.Where)
	}
	if _, err := h.Newest(ctx, "node-b"); !errors.Is(err, plane.ErrNoDeclaration) {
		t.Fatalf("another node's: expected ErrNoDeclaration, got %v", err)
	}
}

// TestANewestCarryingTwoSequencesIsRefused: a publisher that put a
// sequence header of its own on a message of NODES (to pass an old
// declaration off at another position) makes the direct get answer with
// two; the answer is refused as no declaration, whatever it holds.
func TestANewestCarryingTwoSequencesIsRefused(t *testing.T) {
	h, js := planeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := nats.NewMsg(wire.NodeDeclare("node-a"))
	msg.Data = []byte(`{"node":"node-a","revision":9}`)
	msg.Header.Set(nats.JSSequence, "1000")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	got, err := h.Newest(ctx, "node-a")
	if !errors.Is(err, wire.ErrDeclaration) || !strings.Contains(err.Error(), "2 sequences") {
		t.Fatalf("expected the answer refused for its two sequences, got %+v (%v)", got, err)
	}
	if got.Position != 0 || got.Body != nil {
		t.Fatalf("a refused answer returned %+v", got)
	}
}

// TestAReportIsConfirmedAndKeptOncePerID: Report returns once CONTROL
// holds the report; the same id sent again is kept once; with no CONTROL
// to hold it, Report fails.
func TestAReportIsConfirmedAndKeptOncePerID(t *testing.T) {
	h, js := planeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	report := func(id string) []byte {
		return wire.Report{Kind: wire.KindReport, Node: "node-a", ID: id, At: time.Now(), Applied: 1}.Marshal()
	}
	held := func() uint64 {
		t.Helper()
		s, err := js.Stream(ctx, wire.StreamControl)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	if err := h.Report(ctx, "node-a", "r1", report("r1")); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("Report returned with CONTROL holding %d messages, want 1", n)
	}
	if err := h.Report(ctx, "node-a", "r1", report("r1")); err != nil {
		t.Fatal(err)
	}
	if err := h.Report(ctx, "node-a", "r2", report("r2")); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 2 {
		t.Fatalf("r1 twice and r2: CONTROL holds %d messages, want 2", n)
	}
	m, err := js.Stream(ctx, wire.StreamControl)
	if err != nil {
		t.Fatal(err)
	}
	first, err := m.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := wire.ParseReport(first.Subject, first.Data); err != nil || r.ID != "r1" || first.Header.Get(jetstream.MsgIDHeader) != "r1" {
		t.Fatalf("expected report r1 with its id as the message id, got %+v %v (%v)", r, first.Header, err)
	}
	if err := js.DeleteStream(ctx, wire.StreamControl); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	if err := h.Report(rctx, "node-a", "r3", report("r3")); err == nil {
		t.Fatal("a report was confirmed with no CONTROL to hold it")
	}
}

// TestACredentialRequestUnansweredIsMadeAgain: an answer lost on the way
// (a reload clearing the service import it crossed) costs the host one
// short wait, not the caller's whole bound.
func TestACredentialRequestUnansweredIsMadeAgain(t *testing.T) {
	h, js := planeServer(t)
	asked := make(chan struct{}, 10)
	sub, err := js.Conn().Subscribe(wire.NodeCredentials("node-a"), func(m *nats.Msg) {
		asked <- struct{}{}
		if len(asked) == 1 {
			return // the first answer lost
		}
		_ = m.Respond([]byte(`{"sealed":{}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	// Flushed: the host asks on a connection of its own, and a request
	// that reaches the server before this subscription has no responders.
	if err := js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*credentialsFirstWait)
	defer cancel()
	got, err := h.Credentials(ctx, "node-a")
	if err != nil {
		t.Fatalf("expected the second request answered within the bound, got %v (asked %d times)", err, len(asked))
	}
	if string(got) != `{"sealed":{}}` || len(asked) != 2 {
		t.Fatalf("expected the second answer after two requests, got %q after %d", got, len(asked))
	}
}

// TestACredentialRequestNobodyServesFailsAtOnce: with no controller
// listening, asking again would not help; the caller hears so at once.
func TestACredentialRequestNobodyServesFailsAtOnce(t *testing.T) {
	h, _ := planeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := h.Credentials(ctx, "node-a")
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("expected no responders, got %v", err)
	}
	if waited := time.Since(start); waited > credentialsFirstWait {
		t.Fatalf("expected the refusal at once, waited %s", waited)
	}
}
