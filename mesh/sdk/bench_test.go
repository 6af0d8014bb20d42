package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The SDK's two round trips beside the same operations through raw
// nats.go, each on its own in-process server with the composed grants:
// what the envelope, validation, dedup and error mapping cost.

var benchBody = []byte(`{"celsius":21.5}`)

// BenchmarkToolCall is one call answered: Request -> Handle -> reply.
func BenchmarkToolCall(b *testing.B) {
	b.Run("sdk", func(b *testing.B) {
		tm := startMesh(b, controller.DefaultPolicy())
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
	b.Run("nats", func(b *testing.B) {
		tm := startMesh(b, controller.DefaultPolicy())
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
	b.Run("sdk", func(b *testing.B) {
		tm := startMesh(b, controller.DefaultPolicy())
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
	})
	b.Run("nats", func(b *testing.B) {
		tm := startMesh(b, controller.DefaultPolicy())
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
	})
}
