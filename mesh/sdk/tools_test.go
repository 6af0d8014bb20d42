package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// Tools: a call is answered; a failing or panicking handler reaches the
// caller as a *ToolError; nobody serving is ErrNoResponders; silence is
// ErrTimeout.
func TestToolCalls(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	logger := tm.connect(t, loggerUser)
	call := func(d time.Duration, args string) ([]byte, error) {
		return logger.Request(ctxFor(t, d), "catalog", "catalog_tools", []byte(args))
	}

	if _, err := call(5*time.Second, `{}`); !errors.Is(err, sdk.ErrNoResponders) {
		t.Fatalf("before anyone serves: expected ErrNoResponders, got %v", err)
	}

	catalog := tm.connect(t, catalogUser)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the modules close: a silent handler returns
	if err := catalog.Handle("catalog_tools", func(ctx context.Context, args []byte) ([]byte, error) {
		switch string(args) {
		case `"fail"`:
			return nil, errors.New("catalog store unreachable")
		case `"panic"`:
			panic("index out of range")
		case `"silent"`:
			<-release
			return nil, nil
		}
		return append([]byte(`{"echo":`), append(args, '}')...), nil
	}); err != nil {
		t.Fatal(err)
	}

	out, err := call(5*time.Second, `[1,2]`)
	if err != nil || string(out) != `{"echo":[1,2]}` {
		t.Fatalf("expected the answer, got %s, %v", out, err)
	}
	for args, msg := range map[string]string{`"fail"`: "catalog store unreachable", `"panic"`: "handler panicked: index out of range"} {
		_, err := call(5*time.Second, args)
		var te *sdk.ToolError
		if !errors.As(err, &te) || te.Module != "catalog" || te.Tool != "catalog_tools" || te.Message != msg {
			t.Fatalf("%s: expected a *ToolError %q, got %v", args, msg, err)
		}
	}
	if _, err := call(300*time.Millisecond, `"silent"`); !errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("expected ErrTimeout, got %v", err)
	}
}

// Several runtimes serving one tool compete for each call: every call is
// answered once, not once per runtime.
func TestToolQueueGroup(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	logger := tm.connect(t, loggerUser)
	var served atomic.Int64
	var runtimes []*sdk.Module
	for range 2 {
		runtime := tm.connect(t, catalogUser)
		runtimes = append(runtimes, runtime)
		if err := runtime.Handle("catalog_tools", func(context.Context, []byte) ([]byte, error) {
			served.Add(1)
			return []byte(`true`), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	const calls = 20
	for i := range calls {
		if _, err := logger.Request(ctxFor(t, 5*time.Second), "catalog", "catalog_tools", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Closing drains: every call a runtime received has been handled.
	for _, r := range runtimes {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := served.Load(); got != calls {
		t.Fatalf("expected %d handler runs for %d calls, got %d", calls, calls, got)
	}
}

// A module calling a tool its manifest's uses do not grant, or serving a
// tool its manifest does not declare, is refused by the server, and the
// SDK reports the refusal rather than waiting for a timeout.
func TestToolsOutsideTheGrants(t *testing.T) {
	tm := startMesh(t, controller.DefaultPolicy())
	catalog := tm.connect(t, catalogUser)
	if err := catalog.Handle("catalog_tools", func(context.Context, []byte) ([]byte, error) { return []byte(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	sensor := tm.connect(t, sensorUser)
	start := time.Now()
	_, err := sensor.Request(ctxFor(t, 8*time.Second), "catalog", "catalog_tools", nil)
	if !errors.Is(err, sdk.ErrDenied) || errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("expected ErrDenied for a call without a uses grant, got %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected the denial at once, took %s", d)
	}
	if err := sensor.Handle("undeclared", func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("expected ErrDenied serving an undeclared tool, got %v", err)
	}
	// The module is still whole after both refusals.
	if err := sensor.Handle("calibrate", func(context.Context, []byte) ([]byte, error) { return []byte(`"ok"`), nil }); err != nil {
		t.Fatalf("serve a declared tool after a refusal: %v", err)
	}
	person, _ := tm.raw(t, "person.alice")
	reply, err := person.Request(wire.ToolSubject("sensor", "calibrate"), nil, 5*time.Second)
	if err != nil || string(reply.Data) != `"ok"` {
		t.Fatalf("expected alice's call answered, got %v, %v", reply, err)
	}
}
