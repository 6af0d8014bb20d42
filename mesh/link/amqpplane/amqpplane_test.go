package amqpplane_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

func sample(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestTheControlPlaneOnTheBroker: the controller asserts the topology the
// broker booted with and changes nothing; a host's report reaches
// CONTROL's consumer with its subject and id, and one held comes again
// after its delay with a higher attempt; a declaration kept is what the
// host reads, again after the queue is read empty; a credential request
// is answered to the host that asked, and put again within ResendEvery
// when its queue lost it.
func TestTheControlPlaneOnTheBroker(t *testing.T) {
	m := sample(t)
	br := amqptest.Start(t, m)
	ctx := ctxT(t, 2*time.Minute)
	const resendEvery = time.Second
	c, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{ResendEvery: resendEvery})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	a, err := c.Assert(ctx, m)
	if err != nil {
		t.Fatalf("assert: %v", err)
	}
	if a.Changed() {
		t.Fatalf("expected the definitions loaded at boot to need nothing, got %+v", a)
	}

	node := m.Nodes[0].Name
	h, err := amqpplane.DialHost(ctx, br.Creds[wire.HostUser(node)], amqpplane.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	got := make(chan plane.ControlMsg, 8)
	stop, err := c.Consume(ctx, 8, func(msg plane.ControlMsg) { got <- msg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := h.Report(ctx, node, "r-1", []byte(`{"kind":"report"}`)); err != nil {
		t.Fatalf("report: %v", err)
	}
	var first plane.ControlMsg
	select {
	case first = <-got:
	case <-ctx.Done():
		t.Fatal("the report did not reach the controller")
	}
	if first.Subject() != wire.NodeReport(node) || first.ID() != "r-1" || first.Attempt() != 1 {
		t.Fatalf("expected %s id r-1 attempt 1, got %s id %s attempt %d", wire.NodeReport(node), first.Subject(), first.ID(), first.Attempt())
	}
	held := time.Now()
	if err := first.Hold(700 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-got:
		if since := time.Since(held); since < 700*time.Millisecond || again.ID() != "r-1" || again.Attempt() != 2 {
			t.Fatalf("expected r-1 again after 700ms at attempt 2, got %s after %v at attempt %d", again.ID(), since, again.Attempt())
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the held report did not come again")
	}

	k, err := c.Keep(ctx, []plane.SignedDeclaration{{Node: node, Body: []byte(`{"revision":1}`), Signature: "sig-1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	if err := k.Set(ctx, []plane.SignedDeclaration{{Node: node, Body: []byte(`{"revision":2}`), Signature: "sig-2"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		d, err := h.Newest(ctx, node)
		if err != nil || string(d.Body) != `{"revision":2}` || d.Signature != "sig-2" {
			t.Fatalf("read %d: expected revision 2 signed sig-2, got %q %q %v", i, d.Body, d.Signature, err)
		}
	}
	// Emptied (an operator's purge), the queue has the declaration again
	// within a resend.
	ch, err := br.Dial(t, wire.ControllerUser).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueuePurge(wire.NodeQueue(node), false); err != nil {
		t.Fatalf("purge %s: %v", wire.NodeQueue(node), err)
	}
	purged := time.Now()
	for {
		d, err := h.Newest(ctx, node)
		if err == nil && string(d.Body) == `{"revision":2}` {
			break
		}
		if time.Since(purged) > 3*resendEvery {
			t.Fatalf("expected revision 2 back in %s within %s of its purge, got %q %v", wire.NodeQueue(node), 3*resendEvery, d.Body, err)
		}
		time.Sleep(100 * time.Millisecond) // polling, bounded above
	}
	other := m.Nodes[1].Name
	// The broker refuses another node's queue to this host.
	if _, err := h.Newest(ctx, other); !errors.Is(err, link.ErrDenied) {
		t.Fatalf("expected another node's declaration refused, got %v", err)
	}

	stopDesk, err := c.ServeCredentials(ctx, func(_ context.Context, n string) []byte { return []byte(`{"node":"` + n + `"}`) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopDesk)
	answer, err := h.Credentials(ctx, node)
	if err != nil || string(answer) != `{"node":"`+node+`"}` {
		t.Fatalf("expected the desk's answer for %s, got %q %v", node, answer, err)
	}
	if _, err := h.Credentials(ctxT(t, 3*time.Second), other); !errors.Is(err, link.ErrDenied) {
		t.Fatalf("expected a request on another node's key refused, got %v", err)
	}

	heard := make(chan string, 4)
	stopHearing, err := c.Hear(ctx, func(n string, _ []byte) { heard <- n })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopHearing)
	if err := h.Alive(ctx, node, []byte(`{"node":"`+node+`"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-heard:
		if n != node {
			t.Fatalf("expected a heartbeat of %s, got %s", node, n)
		}
	case <-ctx.Done():
		t.Fatal("the heartbeat was not heard")
	}
	if !c.Connected() {
		t.Fatal("expected the controller connected")
	}
}

// TestBadInputOnTheBroker: issue 19's bad input against the broker
// itself, one broker for all: each a clear error naming what was wrong,
// never the password, and nothing created or changed on the broker.
func TestBadInputOnTheBroker(t *testing.T) {
	m := sample(t)
	br := amqptest.Start(t, m)
	t.Run("a queue missing", func(t *testing.T) { queueMissing(t, m, br) })
	t.Run("an exchange missing", func(t *testing.T) { exchangeMissing(t, m, br) })
	t.Run("another certificate", func(t *testing.T) { anotherCertificate(t, m, br) })
	t.Run("a NATS credential", func(t *testing.T) { aNATSCredential(t, m, br) })
}

// queueMissing: a host whose declaration queue or report queue is not on
// the broker (deleted by an operator, a topology not asserted yet) is
// told which, as plane.ErrMissing, and creates neither; once the
// controller asserts the topology again, the host reads and reports as
// before.
func queueMissing(t *testing.T, m *meshdesc.Mesh, br *amqptest.Broker) {
	ctx := ctxT(t, 2*time.Minute)
	node := m.Nodes[0].Name
	admin, err := br.Dial(t, wire.ControllerUser).Channel()
	if err != nil {
		t.Fatal(err)
	}
	report, _ := wire.ControlQueue(wire.NodeReport(node))
	for _, q := range []string{wire.NodeQueue(node), report} {
		if _, err := admin.QueueDelete(q, false, false, false); err != nil {
			t.Fatalf("delete %s: %v", q, err)
		}
	}
	h, err := amqpplane.DialHost(ctx, br.Creds[wire.HostUser(node)], amqpplane.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if _, err := h.Newest(ctx, node); !errors.Is(err, plane.ErrMissing) || !strings.Contains(err.Error(), wire.NodeQueue(node)) {
		t.Fatalf("expected ErrMissing naming %s, got %v", wire.NodeQueue(node), err)
	}
	if err := h.Report(ctx, node, "r-1", []byte(`{}`)); !errors.Is(err, plane.ErrMissing) || !strings.Contains(err.Error(), wire.NodeReport(node)) {
		t.Fatalf("expected ErrMissing naming %s, got %v", wire.NodeReport(node), err)
	}
	for _, q := range []string{wire.NodeQueue(node), report} {
		if slices.Contains(br.QueuesIn(ctx, t, wire.AMQPControlVhost), q) {
			t.Fatalf("expected %s still missing (a host creates nothing), got it on the broker", q)
		}
	}
	c := assert(ctx, t, m, br)
	if !slices.Contains(c, "queue "+report) || !slices.Contains(c, "queue "+wire.NodeQueue(node)) {
		t.Fatalf("expected the assertion to make both queues again, got %v", c)
	}
	if err := h.Report(ctx, node, "r-2", []byte(`{}`)); err != nil {
		t.Fatalf("expected the report taken once its queue is back, got %v", err)
	}
}

// exchangeMissing: the control plane's exchange deleted, a host's report
// and heartbeat are refused as plane.ErrMissing naming the exchange, and
// the host declares nothing; once the controller asserts the topology
// again (the exchange and its bindings), the host reports as before.
func exchangeMissing(t *testing.T, m *meshdesc.Mesh, br *amqptest.Broker) {
	ctx := ctxT(t, 2*time.Minute)
	node := m.Nodes[0].Name
	ctl := br.Dial(t, wire.ControllerUser)
	admin, err := ctl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ExchangeDelete(wire.ExchangeControl, false, false); err != nil {
		t.Fatalf("delete %s: %v", wire.ExchangeControl, err)
	}
	h, err := amqpplane.DialHost(ctx, br.Creds[wire.HostUser(node)], amqpplane.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	for what, send := range map[string]func() error{
		"a report":    func() error { return h.Report(ctx, node, "r-3", []byte(`{}`)) },
		"a heartbeat": func() error { return h.Alive(ctx, node, []byte(`{}`)) },
	} {
		err := send()
		if !errors.Is(err, plane.ErrMissing) || !strings.Contains(err.Error(), "exchange "+wire.ExchangeControl) {
			t.Fatalf("%s: expected ErrMissing naming the exchange %s, got %v", what, wire.ExchangeControl, err)
		}
		t.Logf("%s with the exchange missing: %v", what, err)
	}
	// Still missing: a passive declare (which creates nothing) is
	// refused.
	probe, err := ctl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.ExchangeDeclarePassive(wire.ExchangeControl, "topic", true, false, false, false, nil); err == nil {
		t.Fatalf("expected %s still missing (a host creates nothing), got it on the broker", wire.ExchangeControl)
	}
	if c := assert(ctx, t, m, br); !slices.Contains(c, "exchange "+wire.ExchangeControl) {
		t.Fatalf("expected the assertion to make %s again, got %v", wire.ExchangeControl, c)
	}
	if err := h.Report(ctx, node, "r-4", []byte(`{}`)); err != nil {
		t.Fatalf("expected the report taken once the exchange and its bindings are back, got %v", err)
	}
}

// anotherCertificate: a host whose credential pins a certificate other
// than the broker's is refused at the handshake, naming both
// fingerprints and not its password.
func anotherCertificate(t *testing.T, m *meshdesc.Mesh, br *amqptest.Broker) {
	ctx := ctxT(t, time.Minute)
	cred := br.Creds[wire.HostUser(m.Nodes[0].Name)]
	presented := cred.Fingerprint
	cred.Fingerprint = strings.Repeat("0", 64)
	h, err := amqpplane.DialHost(ctx, cred, amqpplane.HostOptions{})
	if err == nil {
		_ = h.Close()
		t.Fatal("expected another certificate's pin refused, got a connection")
	}
	if !errors.Is(err, link.ErrFingerprint) || !strings.Contains(err.Error(), "pinned "+cred.Fingerprint[:16]) || !strings.Contains(err.Error(), "presented "+presented[:16]) || strings.Contains(err.Error(), cred.Password()) {
		t.Fatalf("expected ErrFingerprint naming both fingerprints and not the password, got %v", err)
	}
}

// aNATSCredential: a host's NATS credential (tls://) pointed at the
// broker fails within its context, naming where it dialled and not the
// password: the broker never answers NATS's protocol.
func aNATSCredential(t *testing.T, m *meshdesc.Mesh, br *amqptest.Broker) {
	cred := br.Creds[wire.HostUser(m.Nodes[0].Name)]
	cred.URL = wire.BusURL(cred.User(), cred.Password(), br.Addr())
	// Whole, as a host's credential on NATS is: only the bus is wrong.
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cred.DeclarationKey = wire.EncodeDeclarationKey(pub)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	h, err := buses.DialHost(ctx, cred)
	if err == nil {
		_ = h.Close()
		t.Fatal("expected a NATS credential refused by the broker, got a connection")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("expected the dial bounded by its context (3s), got %v", took)
	}
	if !strings.Contains(err.Error(), br.Addr()) || strings.Contains(err.Error(), cred.Password()) {
		t.Fatalf("expected an error naming %s and not the password, got %v", br.Addr(), err)
	}
	t.Logf("a NATS credential against the broker: %v", err)
}

// assert asserts m's topology as the controller and returns what it
// created.
func assert(ctx context.Context, t *testing.T, m *meshdesc.Mesh, br *amqptest.Broker) []string {
	t.Helper()
	c, err := amqpplane.DialController(ctx, br.Creds[wire.ControllerUser], br.Creds[wire.ControllerMeshUser], amqpplane.ControllerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	a, err := c.Assert(ctx, m)
	if err != nil {
		t.Fatalf("assert: %v", err)
	}
	return a.Created
}
