package scale

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// BenchmarkCutover: N hosts of a mesh on a real RabbitMQ, the NATS server
// beside it adopted, all in this process but the broker; the time from
// the cutover begun to done (docs/decisions/0013-cutover.md), and, per
// node, from the switch's commit to the node heard on NATS having
// switched: how long the node's traffic waits on the move.
//
//	MESH_CUTOVER_SIZES=50,200 go test -run X -bench Cutover -benchtime 1x ./mesh/controller/scale
//
// Per node, its silence too (silence-p50-s, -p99-s, -max-s): from its
// host taking up the switch to the host on NATS, the time it sends
// nothing on either bus. Each phase's share is reported too (compose-s, prepare-s, switch-s,
// retire-s); MESH_CUTOVER_LOG=FILE keeps the controller's log of the last
// run, to see where a phase's time went (docs/decisions/0013-cutover.md,
// "Scale").
func BenchmarkCutover(b *testing.B) {
	sizes := sizesOf(b, "MESH_CUTOVER_SIZES", 50, 200)
	for _, n := range sizes {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			var total time.Duration
			var switches, silences []time.Duration
			for range b.N {
				r := runCutover(b, n)
				total += r.took
				switches = append(switches, r.switches...)
				silences = append(silences, r.silences...)
			}
			slices.Sort(switches)
			slices.Sort(silences)
			b.ReportMetric(total.Seconds()/float64(b.N), "cutover-s")
			b.ReportMetric(quantile(switches, 0.5).Seconds(), "switch-p50-s")
			b.ReportMetric(quantile(switches, 0.99).Seconds(), "switch-p99-s")
			b.ReportMetric(switches[len(switches)-1].Seconds(), "switch-max-s")
			b.ReportMetric(quantile(silences, 0.5).Seconds(), "silence-p50-s")
			b.ReportMetric(quantile(silences, 0.99).Seconds(), "silence-p99-s")
			b.ReportMetric(silences[len(silences)-1].Seconds(), "silence-max-s")
		})
	}
}

// quantile is the q-th of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cutoverRun is what one cutover measured: its duration; per node, the
// wait from the switch's commit to the node heard on NATS having switched
// (the controller's view, which includes its own reconnect), and the
// node's silence: from the host taking up the switch to it being on NATS,
// during which it sends nothing on either bus (its log's SwitchingLog and
// ReadyLog naming nats).
type cutoverRun struct {
	took               time.Duration
	switches, silences []time.Duration
}

// runCutover raises a mesh of n nodes on AMQP, enrols its hosts, adopts
// the server beside, and times one cutover.
func runCutover(b *testing.B, n int) cutoverRun {
	b.StopTimer()
	m := fleet(b, n)
	m.Modules = append(m.Modules, meshdesc.Module{Name: "nats", Seat: wire.BrokerSeat})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	a := controllertest.RaiseOnAMQP(b, ctx, m)
	m, st, dir, o := a.M, a.St, a.Dir, a.O
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- controller.Run(runCtx, m, st, controller.RunOptions{Dir: dir, Apply: o, StartTimeout: time.Minute, Logger: controllerLog(b)})
	}()
	defer func() {
		stopRun()
		if err := <-ran; err != nil {
			b.Errorf("controller: %v", err)
		}
	}()
	if _, err := rollout.Adopt(ctx, m, st, dir, o, rollout.AdoptOptions{Config: a.Config, Monitor: a.Monitor}); err != nil {
		b.Fatalf("adopt: %v", err)
	}
	nodes := make([]string, n)
	for i, node := range m.Nodes {
		nodes[i] = node.Name
	}
	_, docs, err := rollout.IssueTokens(ctx, m, st, dir, nodes, time.Hour, o)
	if err != nil {
		b.Fatal(err)
	}
	hs := runHosts(b, ctx, b.TempDir(), nodes, docs)
	defer hs.stop()
	failed := hs.failed
	defer func() {
		if b.Failed() {
			c, _ := st.Cutover(context.WithoutCancel(ctx))
			for i, node := range nodes {
				if cn := c.Nodes[node]; cn.Switched.IsZero() {
					b.Logf("host %s, not switched (%+v):\n%s", node, cn, hs.logs[i].String())
				}
			}
		}
	}()
	waitFor(b, time.Minute+time.Duration(n)*500*time.Millisecond, failed, "every host's first report, on AMQP", func() bool { return reportedOn(ctx, st, n, wire.BusAMQP) })

	b.StartTimer()
	start := time.Now()
	if _, _, err := rollout.BeginCutover(ctx, m, st, dir, o, rollout.CutoverOptions{Within: 5 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	var c store.Cutover
	entered := map[store.CutoverPhase]time.Time{store.CutoverCompose: start}
	waitFor(b, time.Minute+time.Duration(n)*500*time.Millisecond, failed, "the cutover's end", func() bool {
		c, err = st.Cutover(ctx)
		if err == nil && entered[c.Phase].IsZero() {
			entered[c.Phase] = time.Now()
		}
		return err == nil && c.Phase.Ended()
	})
	took := time.Since(start)
	b.StopTimer()
	phases := []store.CutoverPhase{store.CutoverCompose, store.CutoverPrepare, store.CutoverSwitch, store.CutoverRetire, store.CutoverDone}
	for i, p := range phases[:len(phases)-1] {
		if from, to := entered[p], entered[phases[i+1]]; !from.IsZero() && !to.IsZero() {
			b.ReportMetric(to.Sub(from).Seconds(), string(p)+"-s")
		}
	}
	if c.Phase != store.CutoverDone {
		b.Fatalf("expected the cutover done, it %s: %s", c.Phase, c.Stopped)
	}
	r := cutoverRun{took: took}
	for _, cn := range c.Nodes {
		r.switches = append(r.switches, cn.Switched.Sub(c.Committed))
	}
	for i, node := range nodes {
		d, err := silenceOf(hs.logs[i].String())
		if err != nil {
			b.Fatalf("host %s: %v", node, err)
		}
		r.silences = append(r.silences, d)
	}
	return r
}

// silenceOf reads a host's log (slog's text) for the time from its last
// SwitchingLog to the ReadyLog naming nats that ends it.
func silenceOf(log string) (time.Duration, error) {
	var switching time.Time
	for line := range strings.Lines(log) {
		at, msg, ok := logLine(line)
		switch {
		case !ok:
		case msg == host.SwitchingLog:
			switching = at
		case msg == host.ReadyLog && strings.Contains(line, " bus="+wire.BusNATS):
			if switching.IsZero() {
				return 0, fmt.Errorf("on %s with no %q before", wire.BusNATS, host.SwitchingLog)
			}
			return at.Sub(switching), nil
		}
	}
	return 0, fmt.Errorf("never logged %q naming %s", host.ReadyLog, wire.BusNATS)
}

// logLine is a text-handler line's time and message.
func logLine(line string) (time.Time, string, bool) {
	rest, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, "", false
	}
	stamp, rest, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return time.Time{}, "", false
	}
	_, rest, ok = strings.Cut(rest, " msg=")
	if !ok {
		return time.Time{}, "", false
	}
	msg, _, _ := strings.Cut(rest, " ")
	return at, strings.Trim(msg, `"`), true
}

// reportedOn says whether n nodes' last reports came on bus.
func reportedOn(ctx context.Context, st store.Store, n int, bus string) bool {
	reps, err := st.Reports(ctx)
	if err != nil {
		return false
	}
	got := 0
	for _, r := range reps {
		if r.Bus == bus && r.Report.Applied > 0 {
			got++
		}
	}
	return got == n
}

// controllerLog is where the controller's lines go: the file
// MESH_CUTOVER_LOG names, to see where a run's time went, or nowhere.
func controllerLog(b *testing.B) *slog.Logger {
	path := os.Getenv("MESH_CUTOVER_LOG")
	if path == "" {
		return slog.New(slog.DiscardHandler)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return slog.New(slog.NewTextHandler(f, nil))
}

func TestASilenceIsReadFromAHostsLog(t *testing.T) {
	log := `time=2026-12-06T00:12:31.100Z level=INFO msg=ready node=node-0 user=host.node-0
time=2026-12-06T00:12:53.600Z level=INFO msg=switching generation=1 bus=nats
time=2026-12-06T00:12:53.700Z level=WARN msg="the declaration waits to switch" err=x
time=2026-12-06T00:12:54.100Z level=INFO msg=switching generation=1 bus=nats
time=2026-12-06T00:12:54.350Z level=INFO msg=ready node=node-0 user=host.node-0 bus=nats
`
	if d, err := silenceOf(log); err != nil || d != 250*time.Millisecond {
		t.Fatalf("expected 250ms from the last switching to ready on nats, got %v, %v", d, err)
	}
	if _, err := silenceOf("time=2026-12-06T00:12:31.100Z level=INFO msg=ready node=node-0\n"); err == nil {
		t.Fatal("expected a host never on nats refused")
	}
}
