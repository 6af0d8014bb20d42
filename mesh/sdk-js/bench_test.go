package sdkjs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// The JavaScript client beside nats.go, on one in-process nats-server
// with the sample mesh's grants: every benchmark's variants run on the
// same server, one after another (benchstat -col /sub compares them).
//
// A JavaScript variant is a script of bench/, started once per benchmark
// and connected before the clock starts; each run sends it b.N and it
// answers with what it timed inside node, which is reported as the
// metrics (msgs/s, p50-µs, p99-µs). ns/op is the Go side's clock around
// that exchange, so it also holds a pipe's round trip per run, not node's
// start-up.

var (
	bob       = wire.PersonUser("bob")
	sensor    = wire.ModuleUser("node-a", "sensor")
	logger    = wire.ModuleUser("node-b", "logger")
	loggerCon = wire.ModuleConsumer("node-b", "logger")
	// bob may call calibrate; sensor serves it. Nobody else listens, so a
	// publish there costs the server its parse and permission check only.
	calibrate      = wire.ToolSubject("sensor", "calibrate")
	calibrateQueue = wire.ToolQueue("sensor", "calibrate")
	reading        = wire.EventSubject("sensor", "reading")
)

const messageSize = 128

// BenchmarkPublish is publish throughput: b.N messages of 128 B, then a
// flush. The figure is -benchtime 1000000x. writer is a bare Node
// socket writing frames built beforehand, for what Node itself allows.
func BenchmarkPublish(b *testing.B) {
	bus := startBenchBus(b)
	setup := map[string]any{"user": bob, "subject": calibrate, "size": messageSize}
	js := bus.script(b, "publish.js", setup)
	writer := bus.script(b, "writer.js", setup)
	payload := make([]byte, messageSize)
	b.Run("sub=nats.go", func(b *testing.B) {
		nc := bus.dial(b, bob)
		b.ResetTimer()
		for range b.N {
			if err := nc.Publish(calibrate, payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := nc.FlushTimeout(2 * time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("sub=js", func(b *testing.B) { js.measure(b).reportRate(b) })
	b.Run("sub=writer", func(b *testing.B) { writer.measure(b).reportRate(b) })
}

// BenchmarkRequest is request/reply latency: one request at a time, as
// bob calling sensor's calibrate, answered by a nats.go responder on the
// same server for both variants, so they differ by the requester alone.
func BenchmarkRequest(b *testing.B) {
	bus := startBenchBus(b)
	responder := bus.dial(b, sensor)
	if _, err := responder.QueueSubscribe(calibrate, calibrateQueue, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}
	body := `{"to":1}`
	js := bus.script(b, "request.js", map[string]any{"user": bob, "subject": calibrate, "body": body})
	b.Run("sub=nats.go", func(b *testing.B) {
		nc := bus.dial(b, bob)
		took := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			if _, err := nc.Request(calibrate, []byte(body), 5*time.Second); err != nil {
				b.Fatal(err)
			}
			took[i] = time.Since(start)
		}
		b.StopTimer()
		reportLatency(b, took)
	})
	b.Run("sub=js", func(b *testing.B) {
		r := js.measure(b)
		b.ReportMetric(r.P50us, "p50-µs")
		b.ReportMetric(r.P99us, "p99-µs")
	})
}

// BenchmarkPullConsumeAck is the rate at which a module's durable pull
// consumer on EVENTS is drained: b.N events stored before the clock
// starts, each pulled (MSG.NEXT) and acked on its reply subject, the acks
// flushed. At the client's level: the SDKs' consume adds dispatch, dedup
// and the envelope's checks.
func BenchmarkPullConsumeAck(b *testing.B) {
	bus := startBenchBus(b)
	bus.assertStreams(b)
	js := bus.script(b, "pull.js", map[string]any{"user": logger, "next": wire.ConsumerNext(wire.StreamEvents, loggerCon), "batch": 500})
	b.Run("sub=nats.go", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		bus.fill(b, b.N)
		nc := bus.dial(b, logger)
		stream, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		cons, err := stream.Consumer(bus.ctx(b, 5*time.Second), wire.StreamEvents, loggerCon)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		iter, err := cons.Messages()
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			m, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		iter.Stop()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		bus.drained(b)
	})
	b.Run("sub=js", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		bus.fill(b, b.N)
		js.measure(b).reportRate(b)
		bus.drained(b)
	})
	// The SDKs: a module connected before the clock starts, which
	// subscribes (binds its consumer) once it has started; the clock stops
	// at the last handler's return, and the module is closed after it
	// (its acks flushed, then checked).
	jsSDK := bus.script(b, "consume.js", map[string]any{"user": logger, "pattern": "sensor.reading"})
	b.Run("sub=go-sdk", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		bus.fill(b, b.N)
		m := bus.module(b, logger)
		var handled atomic.Int64
		all := make(chan struct{})
		b.ResetTimer()
		if err := m.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		<-all
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		bus.drained(b)
	})
	b.Run("sub=js-sdk", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		bus.fill(b, b.N)
		jsSDK.measure(b).reportRate(b)
		bus.drained(b)
	})
}

// BenchmarkEventPublishToHandle is one event from an emitter's publish
// (PubAck awaited) to a consumer's handler, acked, one at a time, as
// mesh/sdk's benchmark of the same name: nats.go spelling the envelope by
// hand, the Go SDK, and the JavaScript SDK (both modules in one node).
// Each variant's consumer is gone before the next binds the same one.
func BenchmarkEventPublishToHandle(b *testing.B) {
	bus := startBenchBus(b)
	bus.assertStreams(b)
	b.Run("sub=nats.go", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		pub, err := jetstream.New(bus.dial(b, sensor))
		if err != nil {
			b.Fatal(err)
		}
		sub, err := jetstream.New(bus.dial(b, logger))
		if err != nil {
			b.Fatal(err)
		}
		cons, err := sub.Consumer(bus.ctx(b, 5*time.Second), wire.StreamEvents, loggerCon)
		if err != nil {
			b.Fatal(err)
		}
		iter, err := cons.Messages()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(iter.Stop)
		ctx := context.Background()
		took := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			msg := event()
			if _, err := pub.PublishMsg(ctx, msg, jetstream.WithMsgID(msg.Header.Get(wire.HeaderEventID))); err != nil {
				b.Fatal(err)
			}
			got, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			if err := got.Ack(); err != nil {
				b.Fatal(err)
			}
			took[i] = time.Since(start)
		}
		b.StopTimer()
		reportLatency(b, took)
		bus.drained(b)
	})
	b.Run("sub=go-sdk", func(b *testing.B) {
		bus.srv.LeaveAsFound(b)
		emitter := bus.module(b, sensor)
		consumer := bus.module(b, logger)
		handled := make(chan struct{}, 1)
		if err := consumer.Subscribe("sensor.reading", func(context.Context, sdk.Event) error {
			handled <- struct{}{}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		body := event().Data
		took := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			if _, err := emitter.Publish(ctx, "reading", body); err != nil {
				b.Fatal(err)
			}
			<-handled
			took[i] = time.Since(start)
		}
		b.StopTimer()
		reportLatency(b, took)
		bus.drained(b)
	})
	js := bus.script(b, "event.js", map[string]any{"pub": sensor, "sub": logger, "key": "reading", "pattern": "sensor.reading", "body": string(event().Data)})
	b.Run("sub=js-sdk", func(b *testing.B) {
		r := js.measure(b)
		b.ReportMetric(r.P50us, "p50-µs")
		b.ReportMetric(r.P99us, "p99-µs")
		bus.drained(b)
	})
}

func reportLatency(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(quantile(took, 0.50), "p50-µs")
	b.ReportMetric(quantile(took, 0.99), "p99-µs")
}

// TestAStalledSubscriberKeepsMemoryBounded floods a subscription whose
// handler never returns (bench/stall.js) from a nats.go connection, and
// checks that the client holds no more than its cap, counts every message
// it dropped, and says it is slow once. The same flood with the cap
// lifted must break the memory bound, or the bound would prove nothing.
func TestAStalledSubscriberKeepsMemoryBounded(t *testing.T) {
	node := requireNode(t)
	readFiles(t, "src", "bench")
	bus := startBenchBus(t)
	const flood, capped, boundMiB = 200000, 1000, 16
	type outcome struct {
		N           int      `json:"n"`
		Handled     int      `json:"handled"`
		Pending     int      `json:"pending"`
		Dropped     int      `json:"dropped"`
		SlowReports int      `json:"slowReports"`
		OtherErrors []string `json:"otherErrors"`
		GrowthMiB   float64  `json:"growthMiB"`
		HeapMiB     float64  `json:"heapGrowthMiB"`
		BuffersMiB  float64  `json:"buffersGrowthMiB"`
		Closed      string   `json:"closed"`
		Ready       bool     `json:"ready"`
		Error       string   `json:"error"`
	}
	stall := func(t *testing.T, pending int) outcome {
		arg, err := json.Marshal(map[string]any{"sub": sensor, "subject": calibrate, "queue": calibrateQueue, "pendingMessages": pending})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--expose-gc", filepath.Join("bench", "stall.js"), string(arg))
		cmd.Env = append(os.Environ(), "MESH_BENCH="+bus.env)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = in.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("node bench/stall.js: %v", err)
			}
		}()
		lines := bufio.NewScanner(stdout)
		read := func() outcome {
			if !lines.Scan() {
				t.Fatalf("node bench/stall.js ended without answering: %v", lines.Err())
			}
			var o outcome
			if err := json.Unmarshal(lines.Bytes(), &o); err != nil || o.Error != "" {
				t.Fatalf("node bench/stall.js printed %s (%v)", lines.Bytes(), err)
			}
			return o
		}
		if o := read(); !o.Ready {
			t.Fatalf("node bench/stall.js began with %+v, not ready", o)
		}
		pub := bus.dial(t, bob)
		payload := make([]byte, messageSize)
		for range flood {
			if err := pub.Publish(calibrate, payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.FlushTimeout(time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(in, "{\"n\":%d}\n", flood); err != nil {
			t.Fatal(err)
		}
		o := read()
		t.Logf("pending cap %d: %+v", pending, o)
		return o
	}
	t.Run("capped", func(t *testing.T) {
		o := stall(t, capped)
		if o.Handled != 1 || o.Pending != capped {
			t.Errorf("handler given %d and %d held, want 1 and the cap, %d", o.Handled, o.Pending, capped)
		}
		if got := o.Handled + o.Pending + o.Dropped; got != flood {
			t.Errorf("handled %d + held %d + dropped %d = %d, want every one of the %d published", o.Handled, o.Pending, o.Dropped, got, flood)
		}
		if o.Closed != "" {
			t.Errorf("the subscriber's connection was closed: %s", o.Closed)
		}
		if o.SlowReports != 1 || len(o.OtherErrors) != 0 {
			t.Errorf("slow consumer reported %d times (want once), other errors %q", o.SlowReports, o.OtherErrors)
		}
		if o.GrowthMiB > boundMiB {
			t.Errorf("memory grew %.1f MiB holding %d of %d messages, want under %d MiB", o.GrowthMiB, o.Pending, flood, boundMiB)
		}
	})
	t.Run("uncapped, the bound is broken", func(t *testing.T) {
		o := stall(t, flood)
		if o.Dropped != 0 || o.Pending != flood-1 {
			t.Fatalf("with a cap of %d, %d dropped and %d held: the flood did not all arrive", flood, o.Dropped, o.Pending)
		}
		if o.GrowthMiB <= boundMiB {
			t.Errorf("memory grew %.1f MiB holding all %d messages, under the %d MiB bound: the bound tells nothing", o.GrowthMiB, flood, boundMiB)
		}
	})
}

// event is sensor.reading as the SDKs emit it: the envelope in headers,
// a JSON body of messageSize bytes.
func event() *nats.Msg {
	const shape = `{"celsius":21.5,"pad":"%s"}`
	body := fmt.Appendf(nil, shape, strings.Repeat("x", messageSize-len(shape)+2))
	return &nats.Msg{Subject: reading, Data: body, Header: nats.Header{
		wire.HeaderEventID: {nats.NewInbox()}, wire.HeaderSource: {"sensor"}, wire.HeaderNode: {"node-a"},
		wire.HeaderTime: {wire.FormatTime(time.Now())}, wire.HeaderContentType: {wire.ContentTypeJSON},
	}}
}

// module is user connected through the Go SDK, with its credential
// document where a host would put it.
func (bus *benchBus) module(b *testing.B, user string) *sdk.Module {
	b.Helper()
	path := filepath.Join(b.TempDir(), "credential.json")
	if err := os.WriteFile(path, bus.srv.Creds[user].Marshal(), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{wire.EnvNode, wire.EnvModule} {
		b.Setenv(name, "") // restored after; Connect sets them
	}
	m, err := sdk.Connect(bus.ctx(b, 10*time.Second), path)
	if err != nil {
		b.Fatalf("connect %s: %v", user, err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// benchBus is the bus a benchmark's variants share.
type benchBus struct {
	mesh *meshdesc.Mesh
	srv  *natstest.Server
	env  string
	// js is the controller's in the mesh account, where EVENTS is.
	js jetstream.JetStream
}

// startBenchBus is the real nats-server in-process with the sample mesh's
// composed configuration, and the credentials for the scripts (MESH_BENCH:
// {"creds":{user:{url,fingerprint,inbox,document}}}).
func startBenchBus(tb testing.TB) *benchBus {
	tb.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := natstest.Start(tb, m)
	creds := map[string]map[string]string{}
	for user, c := range srv.Creds {
		creds[user] = map[string]string{"url": c.URL, "fingerprint": c.Fingerprint, "inbox": c.Inbox(), "document": string(c.Marshal())}
	}
	env, err := json.Marshal(map[string]any{"creds": creds})
	if err != nil {
		tb.Fatal(err)
	}
	return &benchBus{mesh: m, srv: srv, env: string(env)}
}

func (bus *benchBus) ctx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// dial is a nats.go connection as user, closed when tb ends.
func (bus *benchBus) dial(tb testing.TB, user string) *nats.Conn {
	tb.Helper()
	nc, err := bus.srv.Dial(bus.ctx(tb, 10*time.Second), user)
	if err != nil {
		tb.Fatalf("dial as %s: %v", user, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// assertStreams creates the streams and consumers with the controller's
// own code, and keeps the controller's JetStream in the mesh account.
func (bus *benchBus) assertStreams(b *testing.B) {
	b.Helper()
	assertStreams(b, bus.srv, bus.mesh)
	js, err := jetstream.New(bus.dial(b, wire.ControllerMeshUser))
	if err != nil {
		b.Fatal(err)
	}
	bus.js = js
}

// fill stores n events the logger's consumer delivers, outside the clock,
// EVENTS purged first. They are whole events, the envelope as the SDKs
// send it, so that the SDKs take them as they would any.
func (bus *benchBus) fill(b *testing.B, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	bus.purge(b)
	nc := bus.dial(b, sensor)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	const window = 1000
	for left := n; left > 0; left -= window {
		for range min(left, window) {
			if _, err := js.PublishMsgAsync(event()); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatalf("%d events not stored in a minute", js.PublishAsyncPending())
		}
	}
	// The consumer counts what the stream stored a moment after the
	// PubAck, not with it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ci := bus.consumer(b)
		if ci.NumPending == uint64(n) && ci.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the consumer has %d to deliver and %d unacked, want %d and none", ci.NumPending, ci.NumAckPending, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (bus *benchBus) consumer(b *testing.B) *jetstream.ConsumerInfo {
	b.Helper()
	c, err := bus.js.Consumer(bus.ctx(b, 5*time.Second), wire.StreamEvents, loggerCon)
	if err != nil {
		b.Fatal(err)
	}
	ci, err := c.Info(bus.ctx(b, 5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	return ci
}

// drained waits until every event has been acked.
func (bus *benchBus) drained(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ci := bus.consumer(b)
		if ci.NumPending == 0 && ci.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the consumer not drained 10 s after the run: %d to deliver, %d unacked", ci.NumPending, ci.NumAckPending)
		}
		time.Sleep(time.Millisecond)
	}
}

// purge empties EVENTS, and with it the consumer.
func (bus *benchBus) purge(b *testing.B) {
	b.Helper()
	s, err := bus.js.Stream(bus.ctx(b, 5*time.Second), wire.StreamEvents)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Purge(bus.ctx(b, 30*time.Second)); err != nil {
		b.Fatal(err)
	}
}

// script is a bench/ script of node's, connected and waiting for runs.
type script struct {
	name string
	in   io.WriteCloser
	out  *bufio.Scanner
}

// result is what a script timed for one run.
type result struct {
	N          int     `json:"n"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgsPerSec"`
	P50us      float64 `json:"p50us"`
	P99us      float64 `json:"p99us"`
	Error      string  `json:"error"`
	Ready      bool    `json:"ready"`
}

// script starts node on bench/name with setup as its argument and waits
// until it says it is connected; it is ended with the benchmark.
func (bus *benchBus) script(b *testing.B, name string, setup any) *script {
	b.Helper()
	node := requireNode(b)
	arg, err := json.Marshal(setup)
	if err != nil {
		b.Fatal(err)
	}
	// MESH_BENCH_NODE_ARGS is for profiling: --cpu-prof --cpu-prof-dir=DIR.
	args := append(strings.Fields(os.Getenv("MESH_BENCH_NODE_ARGS")), filepath.Join("bench", name), string(arg))
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), "MESH_BENCH="+bus.env)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &script{name: name, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		_ = in.Close() // the end of stdin ends the script
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("node bench/%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			b.Errorf("node bench/%s still running 10 s after its stdin closed", name)
		}
	})
	if r := s.read(b); !r.Ready {
		b.Fatalf("node bench/%s began with %+v, not ready", name, r)
	}
	return s
}

func (s *script) read(b *testing.B) result {
	b.Helper()
	if !s.out.Scan() {
		b.Fatalf("node bench/%s ended without answering: %v", s.name, s.out.Err())
	}
	var r result
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		b.Fatalf("node bench/%s printed %q: %v", s.name, s.out.Bytes(), err)
	}
	if r.Error != "" {
		b.Fatalf("node bench/%s: %s", s.name, r.Error)
	}
	return r
}

// measure has the script run b.N operations and is what it timed.
func (s *script) measure(b *testing.B) result {
	b.Helper()
	b.ResetTimer()
	if _, err := fmt.Fprintf(s.in, "{\"n\":%d}\n", b.N); err != nil {
		b.Fatal(err)
	}
	r := s.read(b)
	b.StopTimer()
	if r.N != b.N {
		b.Fatalf("node bench/%s ran %d, asked %d", s.name, r.N, b.N)
	}
	return r
}

func (r result) reportRate(b *testing.B) {
	b.ReportMetric(r.MsgsPerSec, "msgs/s")
}

// quantile of sorted durations, in microseconds (nearest rank).
func quantile(sorted []time.Duration, q float64) float64 {
	i := min(len(sorted)-1, max(0, int(math.Ceil(float64(len(sorted))*q))-1))
	return float64(sorted[i]) / float64(time.Microsecond)
}
