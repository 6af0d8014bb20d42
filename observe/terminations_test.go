package observe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestTerminationsHearTheSDKsRefusal: the Go SDK, consuming as a module,
// refuses a delivery without x-node; the server's advisory, heard as the
// controller's user in the mesh account, names the delivery, its first
// delivery and the header. A delivery the SDK handles and acknowledges
// leaves no advisory, and the consumer's state after it is what it was
// after the refusal: the state alone cannot tell a refusal from an ack.
// Nobody else may hear the advisories, and the mesh account has no room
// for a stream capturing them.
func TestTerminationsHearTheSDKsRefusal(t *testing.T) {
	s := startMesh(t, "conformance.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const node, module = "node-b", "consumer"
	consumer := wire.ModuleConsumer(node, module)

	ctl, err := Dial(ctx, s.Creds[wire.ControllerMeshUser], "")
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if err := ctl.Try(ctx, Subscribe, "$JS.EVENT.ADVISORY.>"); !errors.Is(err, ErrRefused) {
		t.Fatalf("expected the controller refused every advisory but the terminations, got %v", err)
	}
	mod, err := Dial(ctx, s.Creds[wire.ModuleUser(node, module)], "")
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	if _, err := WatchTerminations(ctx, mod); !errors.Is(err, ErrRefused) {
		t.Fatalf("expected a module refused the advisories, got %v", err)
	}

	js, _ := jetstream.New(ctl.Conn)
	eventsAndDead(ctx, t, js, consumer, 5)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TAP", Subjects: []string{wire.TerminatedAdvisories}, MaxBytes: 1 << 20}); err == nil {
		t.Fatal("expected the mesh account to hold no third stream (max_streams), so no stream can capture the advisories")
	}

	watch, err := WatchTerminations(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()

	t.Setenv(wire.EnvNode, "")
	t.Setenv(wire.EnvModule, "")
	cred := filepath.Join(t.TempDir(), "credential.json")
	if err := os.WriteFile(cred, s.Creds[wire.ModuleUser(node, module)].Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := sdk.Connect(ctx, cred, sdk.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var handled atomic.Int32
	if err := reader.Subscribe("emitter.reading", func(context.Context, sdk.Event) error { handled.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}

	_, ejs := dialAs(ctx, t, s, wire.ModuleUser("node-a", "emitter"))
	publish := func(withNode bool) uint64 { t.Helper(); return reading(ctx, t, ejs, withNode) }
	settled := func(seq uint64) *jetstream.ConsumerInfo {
		t.Helper()
		for {
			c, err := js.Consumer(ctx, wire.StreamEvents, consumer)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.AckFloor.Stream >= seq && info.NumAckPending == 0 {
				return info
			}
			select {
			case <-ctx.Done():
				t.Fatalf("stream sequence %d never settled: ack floor %d, %d pending", seq, info.AckFloor.Stream, info.NumAckPending)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	refused := publish(false)
	a, err := watch.Await(ctx, consumer, refused)
	if err != nil {
		t.Fatal(err)
	}
	if part, ok := a.Part(); !ok || part != wire.HeaderNode || a.Deliveries != 1 {
		t.Fatalf("expected a termination at the first delivery naming %s, got %+v", wire.HeaderNode, a)
	}
	afterRefusal := settled(refused)

	accepted := publish(true)
	afterAck := settled(accepted)
	if handled.Load() != 1 {
		t.Fatalf("expected the handler to receive the accepted event alone, it received %d", handled.Load())
	}
	if _, ok := watch.Of(consumer, accepted); ok {
		t.Fatalf("expected no termination of the accepted delivery, heard %+v", watch.Heard())
	}
	if afterRefusal.NumRedelivered != afterAck.NumRedelivered || afterAck.NumPending != afterRefusal.NumPending ||
		afterAck.AckFloor.Stream-afterRefusal.AckFloor.Stream != accepted-refused {
		t.Fatalf("expected the same consumer state after a refusal as after an ack, got %+v and %+v", afterRefusal, afterAck)
	}
	if len(watch.Heard()) != 1 || !watch.Live() {
		t.Fatalf("expected one termination heard on a live watch, heard %+v", watch.Heard())
	}
}

// eventsAndDead creates EVENTS and DEAD as the controller does, and the
// module's consumer on emitter.reading.
func eventsAndDead(ctx context.Context, t *testing.T, js jetstream.JetStream, consumer string, maxDeliver int) {
	t.Helper()
	for _, name := range []string{wire.StreamDead, wire.StreamEvents} {
		subject := wire.SubjectModuleEvents
		if name == wire.StreamDead {
			subject = wire.DeadLetterAdvisories
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, MaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{
		Durable: consumer, FilterSubjects: []string{wire.EventSubject("emitter", "reading")},
		AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: maxDeliver,
	}); err != nil {
		t.Fatal(err)
	}
}

// reading publishes an emitter's reading through js, with x-node or
// without it, and returns its stream sequence.
func reading(ctx context.Context, t *testing.T, js jetstream.JetStream, withNode bool) uint64 {
	t.Helper()
	msg := nats.NewMsg(wire.EventSubject("emitter", "reading"))
	msg.Header.Set(wire.HeaderEventID, nuid.Next())
	msg.Header.Set(wire.HeaderSource, "emitter")
	if withNode {
		msg.Header.Set(wire.HeaderNode, "node-a")
	}
	msg.Header.Set(wire.HeaderTime, wire.FormatTime(time.Now()))
	msg.Header.Set(wire.HeaderContentType, wire.ContentTypeJSON)
	msg.Data = []byte(`{"celsius":18}`)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
