package host

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

func startJetStream(t *testing.T) (*server.Server, jetstream.JetStream) {
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
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamControl, Subjects: []string{wire.SubjectReports}}); err != nil {
		t.Fatal(err)
	}
	return s, js
}

// TestTheOutboxKeepsReportsUntilControlHoldsThem: reports made while the
// bus is away wait on disk, survive the host started again, and are sent
// in order, each once, when the bus is there.
func TestTheOutboxKeepsReportsUntilControlHoldsThem(t *testing.T) {
	st := State{Dir: t.TempDir()}
	if err := st.open(); err != nil {
		t.Fatal(err)
	}
	out, err := openOutbox(st)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, id := range []string{"r1", "r2", "r3"} {
		if err := out.add(wire.Report{Kind: wire.KindReport, Node: "node-a", ID: id, At: now, Applied: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	_, js := startJetStream(t)
	// Sending fails while CONTROL cannot take them: nothing is lost.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, _ := js.Stream(ctx, wire.StreamControl)
	if err := js.DeleteStream(ctx, wire.StreamControl); err != nil {
		t.Fatal(err)
	}
	if err := out.send(ctx, js); err == nil {
		t.Fatal("reports sent with no CONTROL to hold them")
	}
	if out.Len() != 3 {
		t.Fatalf("expected three reports waiting, got %d", out.Len())
	}
	// The host started again finds them.
	again, err := openOutbox(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.add(wire.Report{Kind: wire.KindReport, Node: "node-a", ID: "r4", At: now, Applied: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, stream.CachedInfo().Config); err != nil {
		t.Fatal(err)
	}
	if err := again.send(ctx, js); err != nil {
		t.Fatal(err)
	}
	if again.Len() != 0 {
		t.Fatalf("expected none waiting, got %d", again.Len())
	}
	cons, err := js.OrderedConsumer(ctx, wire.StreamControl, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for m := range batch.Messages() {
		r, err := wire.ParseReport(m.Subject(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Applied)
	}
	if len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Fatalf("expected reports 1..4 in order, got %v", got)
	}
}
