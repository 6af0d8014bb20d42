package main

import (
	"context"
	"encoding/json"
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
	"github.com/meshbus/mesh/mesh/modules/relay/call"
	"github.com/meshbus/mesh/mesh/modules/sensor/calibrate"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// description is features/testdata/mesh.yaml's shape cut down to the
// relay's case: the sensor on node-a; on node-b relay, whose manifest
// uses sensor.calibrate, and stranger, whose manifest uses nothing; bob,
// who may call every tool.
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

// mesh is the real server with the composed grants, the modules a test
// runs on it, and bob's client, through which the test calls them.
type mesh struct {
	t   *testing.T
	s   *natstest.Server
	dir string
	bob *sdk.Module
}

func start(t *testing.T) *mesh {
	t.Helper()
	d, err := meshdesc.Parse([]byte(description))
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{t: t, s: natstest.Start(t, d), dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.bob, err = sdk.Connect(ctx, m.credential(wire.PersonUser("bob")), quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.bob.Close() })
	return m
}

func quiet() sdk.Option { return sdk.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))) }

// credential writes user's credential to a file of its own, as a host
// does, and returns its path.
func (m *mesh) credential(user string) string {
	m.t.Helper()
	p := filepath.Join(m.dir, user+".json")
	if err := os.WriteFile(p, m.s.Creds[user].Marshal(), 0o600); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// run runs this program as module on node until the test ends, and
// checks it stopped cleanly.
func (m *mesh) run(node, module string) {
	m.t.Helper()
	path := m.credential(wire.ModuleUser(node, module))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), path) }()
	m.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			m.t.Errorf("%s: %v", module, err)
		}
	})
}

// serve serves sensor.calibrate with h on the sensor's credential (the
// sensor's own command is tested in its package; h is its handler, or a
// stand-in). It serves once serve returns.
func (m *mesh) serve(h sdk.ToolHandler) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sensor, err := sdk.Connect(ctx, m.credential(wire.ModuleUser("node-a", "sensor")), quiet())
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = sensor.Close() })
	if err := sensor.Handle(calibrate.Tool, h); err != nil {
		m.t.Fatal(err)
	}
}

// ask calls module's call tool as bob, waiting while nobody serves it
// (the module may still be starting), and returns the relay's answer and
// how long the answered call took.
func (m *mesh) ask(module string, r call.Request) (call.Answer, time.Duration) {
	m.t.Helper()
	a, took, err := m.try(module, r)
	if err != nil {
		m.t.Fatalf("call %s.%s: %v", module, call.Tool, err)
	}
	return a, took
}

func (m *mesh) try(module string, r call.Request) (call.Answer, time.Duration, error) {
	m.t.Helper()
	args, err := json.Marshal(r)
	if err != nil {
		m.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second+r.Budget())
	defer cancel()
	for {
		start := time.Now()
		out, err := m.bob.Request(ctx, module, call.Tool, args)
		took := time.Since(start)
		if errors.Is(err, sdk.ErrNoResponders) {
			select {
			case <-ctx.Done():
				m.t.Fatalf("%s never served %s: %v", module, call.Tool, err)
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return call.Answer{}, took, err
		}
		var a call.Answer
		if err := json.Unmarshal(out, &a); err != nil {
			m.t.Fatalf("the answer of %s.%s is no call.Answer: %v: %s", module, call.Tool, err, out)
		}
		return a, took, nil
	}
}

func sane(t *testing.T, l call.Latency, limit time.Duration) {
	t.Helper()
	if l.MedianUS <= 0 || l.MedianUS > l.P99US || l.P99US > l.MaxUS || l.MaxUS > limit.Microseconds() {
		t.Fatalf("expected 0 < median <= p99 <= max <= %v, got %+v", limit, l)
	}
}

// TestRelay is design 25 §10 step 4's bullet in process: a module's tool
// invoked from another node by an account that can invoke it, and refused
// by the server to one that cannot.
func TestRelay(t *testing.T) {
	t.Parallel()
	m := start(t)
	var sensor calibrate.Sensor
	m.serve(sensor.Calibrate)
	m.run("node-b", "relay")
	m.run("node-b", "stranger")

	t.Run("relay's call is answered", func(t *testing.T) {
		a, _ := m.ask("relay", call.Request{Module: "sensor", Tool: calibrate.Tool, Args: json.RawMessage(`{"to": 2.5}`)})
		if a.Outcome != call.OK || a.Calls != 1 || string(a.Answer) != `{"offset":2.5}` || a.Error != "" {
			t.Fatalf(`expected ok after 1 call answering {"offset":2.5}, got %+v`, a)
		}
		sane(t, a.Latency, call.DefaultTimeout)
		if got := sensor.Offset(); got != 2.5 {
			t.Fatalf("expected the sensor's offset 2.5, got %v", got)
		}
	})

	t.Run("two hundred calls", func(t *testing.T) {
		a, _ := m.ask("relay", call.Request{Module: "sensor", Tool: calibrate.Tool, Args: json.RawMessage(`{"to": 7}`), Times: 200})
		if a.Outcome != call.OK || a.Calls != 200 || string(a.Answer) != `{"offset":7}` {
			t.Fatalf(`expected ok after 200 calls answering {"offset":7}, got %+v`, a)
		}
		sane(t, a.Latency, call.DefaultTimeout)
		if a.Latency.MedianUS > time.Second.Microseconds() {
			t.Fatalf("expected a loopback call's median under a second, got %+v", a.Latency)
		}
	})

	t.Run("bad arguments are the tool's error", func(t *testing.T) {
		for args, want := range map[string]string{
			`{"to": "high"}`: `calibrate: want {"to": <number>}: field "to" is a string, not a number`,
			`{}`:             `calibrate: want {"to": <number>}: field "to" is missing`,
		} {
			a, _ := m.ask("relay", call.Request{Module: "sensor", Tool: calibrate.Tool, Args: json.RawMessage(args), Times: 3})
			if a.Outcome != call.ToolError || a.Calls != 1 || !strings.Contains(a.Error, want) || a.Answer != nil {
				t.Errorf("%s: expected tool_error after 1 call with %q, got %+v", args, want, a)
			}
		}
	})

	t.Run("stranger's call is refused by the server", func(t *testing.T) {
		a, took := m.ask("stranger", call.Request{Module: "sensor", Tool: calibrate.Tool, Args: json.RawMessage(`{"to": 9}`)})
		if a.Outcome != call.Denied || a.Calls != 1 || a.Answer != nil || a.Latency != (call.Latency{}) {
			t.Fatalf("expected denied after 1 call, got %+v", a)
		}
		if !strings.Contains(a.Error, wire.ToolSubject("sensor", calibrate.Tool)) {
			t.Fatalf("expected the server's refusal naming the subject, got %q", a.Error)
		}
		// Refused by the server at once, not timed out at 5 s.
		if took > 2*time.Second {
			t.Fatalf("expected the refusal well under the %v timeout, got it after %v", call.DefaultTimeout, took)
		}
		if got := sensor.Offset(); got == 9 {
			t.Fatal("expected the refused call never to reach the sensor, got its offset 9")
		}
	})

	t.Run("a module the SDK cannot name is invalid", func(t *testing.T) {
		a, _ := m.ask("relay", call.Request{Module: "Sensor", Tool: calibrate.Tool})
		if a.Outcome != call.Invalid {
			t.Fatalf("expected invalid, got %+v", a)
		}
	})

	t.Run("a request it cannot read is the relay's error", func(t *testing.T) {
		_, _, err := m.try("relay", call.Request{Module: "sensor"})
		var te *sdk.ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Message, `field "tool" is empty`) {
			t.Fatalf(`expected a *sdk.ToolError naming field "tool", got %v`, err)
		}
	})
}

func TestRelayNobodyServes(t *testing.T) {
	t.Parallel()
	m := start(t)
	m.run("node-b", "relay")
	a, took := m.ask("relay", call.Request{Module: "sensor", Tool: calibrate.Tool, Args: json.RawMessage(`{"to": 1}`)})
	if a.Outcome != call.NoResponders || a.Calls != 1 || a.Answer != nil || a.Error == "" {
		t.Fatalf("expected no_responders after 1 call, got %+v", a)
	}
	if took > 2*time.Second {
		t.Fatalf("expected no responders at once, got it after %v", took)
	}
}

func TestRelayTimesOut(t *testing.T) {
	t.Parallel()
	m := start(t)
	release := make(chan struct{})
	m.serve(func(ctx context.Context, _ []byte) ([]byte, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return []byte(`{}`), nil
	})
	// Registered after the sensor's Close: runs before it, so that the
	// drain does not wait on a handler still held.
	t.Cleanup(func() { close(release) })
	m.run("node-b", "relay")
	a, _ := m.ask("relay", call.Request{Module: "sensor", Tool: calibrate.Tool, Times: 3, TimeoutMS: 200})
	if a.Outcome != call.Timeout || a.Calls != 1 || a.Answer != nil {
		t.Fatalf("expected timeout after 1 call, got %+v", a)
	}
}
