package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// Tools: a call is answered; a failing or panicking handler reaches the
// caller as a *ToolError; nobody serving is ErrNoResponders, at once;
// silence is ErrTimeout.
func toolCalls(t *testing.T, b bus) {
	logger := b.connect(t, loggerUser)
	call := func(d time.Duration, args string) ([]byte, error) {
		return logger.Request(ctxFor(t, d), "mesh-catalog", "catalog_tools", []byte(args))
	}

	start := time.Now()
	if _, err := call(5*time.Second, `{}`); !errors.Is(err, sdk.ErrNoResponders) {
		t.Fatalf("before anyone serves: expected ErrNoResponders, got %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("expected no responders at once, took %s", d)
	}
	if am, ok := b.(*amqpMesh); ok {
		// AMQP queues the call: the one nobody took leaves nothing behind.
		if n := am.ready(t, catalogQueue); n != 0 {
			t.Fatalf("expected the call nobody took dropped, %s holds %d", catalogQueue, n)
		}
	}

	catalog := b.connect(t, catalogUser)
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
		if !errors.As(err, &te) || te.Module != "mesh-catalog" || te.Tool != "catalog_tools" || te.Message != msg {
			t.Fatalf("%s: expected a *ToolError %q, got %v", args, msg, err)
		}
	}
	if _, err := call(300*time.Millisecond, `"silent"`); !errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("expected ErrTimeout, got %v", err)
	}
}

// Several runtimes serving one tool compete for each call (a queue group
// on NATS, the tool's queue on AMQP): every call is answered once, not
// once per runtime.
func toolQueueGroup(t *testing.T, b bus) {
	logger := b.connect(t, loggerUser)
	var served atomic.Int64
	var runtimes []*sdk.Module
	for range 2 {
		runtime := b.connect(t, catalogUser)
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
		if _, err := logger.Request(ctxFor(t, 5*time.Second), "mesh-catalog", "catalog_tools", []byte(fmt.Sprint(i))); err != nil {
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

// A module calling a tool its manifest's uses do not grant — whether or
// not anyone serves it — or serving a tool its manifest does not declare,
// is refused by the bus, and the SDK reports the refusal at once rather
// than waiting for a timeout.
func toolsOutsideTheGrants(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	denied := func(what string) {
		t.Helper()
		start := time.Now()
		_, err := sensor.Request(ctxFor(t, 8*time.Second), "mesh-catalog", "catalog_tools", nil)
		if !errors.Is(err, sdk.ErrDenied) || errors.Is(err, sdk.ErrTimeout) || errors.Is(err, sdk.ErrNoResponders) {
			t.Fatalf("%s: expected ErrDenied for a call without a uses grant, got %v", what, err)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Fatalf("%s: expected the denial at once, took %s", what, d)
		}
	}
	denied("nobody serving")
	catalog := b.connect(t, catalogUser)
	if err := catalog.Handle("catalog_tools", func(context.Context, []byte) ([]byte, error) { return []byte(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	denied("served")
	if err := sensor.Handle("undeclared", func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("expected ErrDenied serving an undeclared tool, got %v", err)
	}
	// The module is still whole after the refusals.
	if err := sensor.Handle("calibrate", func(context.Context, []byte) ([]byte, error) { return []byte(`"ok"`), nil }); err != nil {
		t.Fatalf("serve a declared tool after a refusal: %v", err)
	}
	if got := b.callRaw(t, wire.PersonUser("alice"), "sensor", "calibrate", nil); string(got) != `"ok"` {
		t.Fatalf("expected alice's call answered, got %s", got)
	}
}

// aResponderAnswersOnlyACallersInbox: a call may name any reply, and the
// bus lets the responder publish once to it (allow_responses on NATS; the
// default exchange, which routes to any queue by name, on AMQP). The SDK
// answers only a caller's inbox, so a call aimed at where the logger's
// events are kept leaves nothing there, and runs no handler.
func aResponderAnswersOnlyACallersInbox(t *testing.T, b bus) {
	sensor := b.connect(t, sensorUser)
	var calls atomic.Int32
	if err := sensor.Handle("calibrate", func(context.Context, []byte) ([]byte, error) {
		calls.Add(1)
		return []byte(`{"forged":true}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	before := b.loggerHolds(t)
	b.callAimedAtLogger(t, wire.PersonUser("alice"), "sensor", "calibrate")
	// Calls are answered one at a time, in arrival order: once an ordinary
	// call is answered, the aimed one has been dealt with.
	if got := b.callRaw(t, wire.PersonUser("alice"), "sensor", "calibrate", []byte(`{}`)); string(got) != `{"forged":true}` {
		t.Fatalf("expected the ordinary call answered, got %s", got)
	}
	if got := b.loggerHolds(t); got != before {
		t.Fatalf("expected the logger's events untouched by an answer (%d), they hold %d", before, got)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("expected the handler to run for the ordinary call only, it ran %d times", n)
	}
}
