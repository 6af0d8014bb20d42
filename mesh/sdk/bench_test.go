package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The SDK's two round trips beside the same operations through raw
// nats.go, both on one in-process server with the composed grants: what
// the envelope, validation, dedup and error mapping cost, measured side by
// side (benchstat -col /sub compares sub=sdk with sub=nats).
//
// Each variant serves the same subject or binds the same consumer, so each
// connects its own clients for its run and is gone from the server before
// the other starts: two responders in one queue group, or two pullers on
// one consumer, would each take a share of the other's traffic.

var benchBody = []byte(`{"celsius":21.5}`)

// BenchmarkToolCall is one call answered: Request -> Handle -> reply.
func BenchmarkToolCall(b *testing.B) {
	tm := startMesh(b, natsplane.DefaultPolicy())
	b.Run("sub=sdk", func(b *testing.B) {
		tm.srv.LeaveAsFound(b)
		catalog := tm.connect(b, catalogUser)
		if err := catalog.Handle("catalog_tools", func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
			b.Fatal(err)
		}
		logger := tm.connect(b, loggerUser)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := logger.Request(ctx, "mesh-catalog", "catalog_tools", benchBody); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sub=nats", func(b *testing.B) {
		tm.srv.LeaveAsFound(b)
		server, _ := tm.raw(b, catalogUser)
		subject := wire.ToolSubject("mesh-catalog", "catalog_tools")
		if _, err := server.QueueSubscribe(subject, wire.ToolQueue("mesh-catalog", "catalog_tools"), func(m *nats.Msg) {
			_ = m.Respond(m.Data)
		}); err != nil {
			b.Fatal(err)
		}
		if err := server.Flush(); err != nil {
			b.Fatal(err)
		}
		client, _ := tm.raw(b, loggerUser)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := client.Request(subject, benchBody, sdk.DefaultTimeout); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEventPublishToHandle is one event from the emitter's publish
// (PubAck awaited) to the consumer's handler, acked.
func BenchmarkEventPublishToHandle(b *testing.B) {
	tm := startMesh(b, natsplane.DefaultPolicy())
	b.Run("sub=sdk", func(b *testing.B) {
		tm.srv.LeaveAsFound(b)
		sensor := tm.connect(b, sensorUser)
		logger := tm.connect(b, loggerUser)
		handled := make(chan struct{}, 1)
		if err := logger.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
			handled <- struct{}{}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := sensor.Publish(ctx, "reading", benchBody); err != nil {
				b.Fatal(err)
			}
			<-handled
		}
		b.StopTimer()
		// The last handler's ack is the dispatcher's, after handled: the
		// consumer must have it before the next run binds the consumer,
		// or that run is handed this one's event once its ack wait ends.
		tm.drained(b)
	})
	b.Run("sub=nats", func(b *testing.B) {
		tm.srv.LeaveAsFound(b)
		_, pub := tm.raw(b, sensorUser)
		_, sub := tm.raw(b, loggerUser)
		ctx := context.Background()
		cons, err := sub.Consumer(ctxFor(b, 5*time.Second), wire.StreamEvents, loggerCons)
		if err != nil {
			b.Fatal(err)
		}
		iter, err := cons.Messages()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(iter.Stop)
		subject := wire.EventSubject("sensor", "reading")
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			// The same envelope the SDK sends, spelled by hand.
			id := nats.NewInbox()
			msg := &nats.Msg{Subject: subject, Data: benchBody, Header: nats.Header{
				wire.HeaderEventID: {id}, wire.HeaderSource: {"sensor"}, wire.HeaderNode: {"node-a"},
				wire.HeaderTime: {wire.FormatTime(time.Now())}, wire.HeaderContentType: {wire.ContentTypeJSON},
			}}
			if _, err := pub.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
				b.Fatal(err)
			}
			got, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			if err := got.Ack(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		tm.drained(b)
	})
}

// drained waits until the logger's consumer has every delivery settled.
func (tm *testMesh) drained(b *testing.B) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ci := tm.consumer(b)
		if ci.NumAckPending == 0 && ci.NumPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("logger's consumer not drained in 10 s: %d unacked, %d undelivered", ci.NumAckPending, ci.NumPending)
		}
		time.Sleep(time.Millisecond)
	}
}
