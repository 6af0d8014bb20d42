package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAPersonsClientCallsToolsThroughTheContract: design 25 §7's client
// connects with a person's credential through the same SDK: it calls the
// tools its grant names, is refused by the server the others, and emits,
// consumes and serves nothing.
func TestAPersonsClientCallsToolsThroughTheContract(t *testing.T) {
	tm := startMesh(t, natsplane.DefaultPolicy())
	sensor := tm.connect(t, sensorUser)
	if err := sensor.Handle("calibrate", func(_ context.Context, args []byte) ([]byte, error) { return args, nil }); err != nil {
		t.Fatal(err)
	}
	catalog := tm.connect(t, catalogUser)
	if err := catalog.Handle("catalog_tools", func(context.Context, []byte) ([]byte, error) { return []byte(`[]`), nil }); err != nil {
		t.Fatal(err)
	}
	alice := tm.connect(t, wire.PersonUser("alice"))
	if alice.Node() != "" || alice.Name() != "" {
		t.Fatalf("a person's client has no node or module, got %q %q", alice.Node(), alice.Name())
	}
	got, err := alice.Request(ctxFor(t, 5*time.Second), "sensor", "calibrate", []byte(`{"to":21}`))
	if err != nil || string(got) != `{"to":21}` {
		t.Fatalf("alice calling sensor.calibrate: %s, %v", got, err)
	}
	start := time.Now()
	if _, err := alice.Request(ctxFor(t, 5*time.Second), "mesh-catalog", "catalog_tools", nil); err != nil {
		t.Fatalf("alice asking the catalogue, as every person may: %v", err)
	}
	if _, err := alice.Request(ctxFor(t, 5*time.Second), "sensor", "reset", nil); !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("alice calling a tool she was not issued: expected ErrDenied, got %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the denial took %s; expected it at once", d)
	}
	if _, err := alice.Publish(ctxFor(t, 5*time.Second), "reading", []byte(`{}`)); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a person publishing: expected ErrInvalid, got %v", err)
	}
	if err := alice.Subscribe("sensor.reading", func(context.Context, sdk.Event) error { return nil }); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a person subscribing: expected ErrInvalid, got %v", err)
	}
	if err := alice.Handle("calibrate", func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a person serving: expected ErrInvalid, got %v", err)
	}
}
