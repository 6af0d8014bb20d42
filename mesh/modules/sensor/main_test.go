package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// description is the relay's mesh (features/testdata/mesh.yaml's shape):
// the sensor on node-a; on node-b relay, whose manifest uses
// sensor.calibrate, and stranger, whose manifest uses nothing.
const description = `
name: sample
bus:
  names: [localhost, 127.0.0.1]
  monitor: 127.0.0.1
nodes:
  - name: node-a
    modules: [sensor]
  - name: node-b
    modules: [relay, stranger]
modules:
  - name: sensor
    tools: [calibrate]
    tool_docs:
      calibrate:
        description: Sets the sensor's reading offset and answers the offset now in force.
        args:
          type: object
          properties:
            to: {type: number}
          required: [to]
          additionalProperties: false
  - name: relay
    tools: [call]
    uses: [sensor.calibrate]
  - name: stranger
    tools: [call]
persons:
  - name: bob
    tools: ["*"]
`

// TestSensorServesCalibrate runs the module as a host does (its
// credential named by $MESH_CREDENTIAL) against the real server with the
// composed grants, and calls it from the other node: as relay, which
// may, and as stranger, which the server refuses.
func TestSensorServesCalibrate(t *testing.T) {
	m, err := meshdesc.Parse([]byte(description))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	dir := t.TempDir()
	write := func(user string) string {
		p := filepath.Join(dir, user+".json")
		if err := os.WriteFile(p, s.Creds[user].Marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv(wire.EnvCredential, write(wire.ModuleUser("node-a", "sensor")))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sensor: %v", err)
		}
	}()

	callCtx, callCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer callCancel()
	relay, err := sdk.Connect(callCtx, write(wire.ModuleUser("node-b", "relay")))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()

	// The module may still be starting: no responders until it serves.
	got, err := relay.Request(callCtx, "sensor", "calibrate", []byte(`{"to": 2.5}`))
	for errors.Is(err, sdk.ErrNoResponders) {
		select {
		case <-callCtx.Done():
			t.Fatalf("sensor never answered: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		got, err = relay.Request(callCtx, "sensor", "calibrate", []byte(`{"to": 2.5}`))
	}
	if err != nil {
		t.Fatalf("calibrate as relay: %v", err)
	}
	if string(got) != `{"offset":2.5}` {
		t.Fatalf(`expected {"offset":2.5}, got %s`, got)
	}

	t.Run("bad arguments are the tool's error", func(t *testing.T) {
		_, err := relay.Request(callCtx, "sensor", "calibrate", []byte(`{"to": "high"}`))
		var te *sdk.ToolError
		if !errors.As(err, &te) {
			t.Fatalf("expected a *sdk.ToolError, got %v", err)
		}
		if want := `calibrate: want {"to": <number>}: field "to" is a string, not a number`; te.Message != want {
			t.Fatalf("expected the message %q, got %q", want, te.Message)
		}
		got, err := relay.Request(callCtx, "sensor", "calibrate", []byte(`{"to": -1}`))
		if err != nil || string(got) != `{"offset":-1}` {
			t.Fatalf(`expected {"offset":-1} after a refused call, got %s, %v`, got, err)
		}
	})

	t.Run("a module whose manifest does not use it is refused by the server", func(t *testing.T) {
		stranger, err := sdk.Connect(callCtx, write(wire.ModuleUser("node-b", "stranger")))
		if err != nil {
			t.Fatal(err)
		}
		defer stranger.Close()
		start := time.Now()
		_, err = stranger.Request(callCtx, "sensor", "calibrate", []byte(`{"to": 9}`))
		if !errors.Is(err, sdk.ErrDenied) {
			t.Fatalf("expected sdk.ErrDenied, got %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("expected the refusal at once, got it after %v", took)
		}
		if !strings.Contains(err.Error(), wire.ToolSubject("sensor", "calibrate")) {
			t.Fatalf("expected the refusal to name the subject, got %v", err)
		}
	})
}
