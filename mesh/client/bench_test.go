package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/clienttest"
)

// BenchmarkCall is one person's call of a tool through the client, on the
// real server in-process, answered by a handler that echoes: the floor
// under every call cmd/mesh and its MCP server make.
func BenchmarkCall(b *testing.B) {
	m := clienttest.Start(b)
	m.Serve(b, "sensor", "calibrate", func(_ context.Context, args []byte) ([]byte, error) { return args, nil })
	c := open(b, m, "alice")
	ctx := clienttest.Ctx(b, 10*time.Minute)
	args := []byte(`{"to":21}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(ctx, "sensor.calibrate", args); err != nil {
			b.Fatal(err)
		}
	}
}
