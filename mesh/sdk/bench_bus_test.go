package sdk_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/meshbus/mesh/internal/amqptest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
)

// BenchmarkToolCallByBus is one tool call answered through the SDK, the
// same module code on each bus: on the nats-server in-process and on
// RabbitMQ in its container (direct reply-to, the serving module's queue),
// both with the sample mesh's composed grants (benchstat -col /bus). It
// is skipped whole where internal/amqptest skips (-short, no Docker).
// The broker shares the machine's cores with the benchmark, as the
// in-process server does.
func BenchmarkToolCallByBus(b *testing.B) {
	call := func(b *testing.B, connect func(testing.TB, string) *sdk.Module) {
		catalog := connect(b, catalogUser)
		if err := catalog.Handle("catalog_tools", func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
			b.Fatal(err)
		}
		logger := connect(b, loggerUser)
		ctx := context.Background()
		// The first call finds the serving module's queue and the
		// reply route; it is not what a steady caller pays.
		if _, err := logger.Request(ctx, "mesh-catalog", "catalog_tools", benchBody); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := logger.Request(ctx, "mesh-catalog", "catalog_tools", benchBody); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The broker is started once for both halves' rounds (a start takes
	// about 20 s); each round connects its own modules.
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	am := &amqpMesh{br: amqptest.Start(b, m)} // skips without Docker or in -short mode
	b.Run("bus=nats", func(b *testing.B) {
		call(b, startMesh(b, natsplane.DefaultPolicy()).connect)
	})
	b.Run("bus=amqp", func(b *testing.B) {
		call(b, am.connect)
	})
}
