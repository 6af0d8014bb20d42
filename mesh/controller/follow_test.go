package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// providerMesh is the sample with a provider, pg on node-a, whose loop
// says what it keeps failing.
func providerMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m := controllertest.SampleMesh(t)
	m.Modules = append(m.Modules, meshdesc.Module{Name: "pg", Provides: []string{"database"}})
	m.Nodes[0].Modules = append(m.Nodes[0].Modules, "pg")
	return controllertest.Revalidate(t, m)
}

// runningController is Run in the background, with its log.
type runningController struct {
	logs   *testutil.SyncBuffer
	cancel context.CancelFunc
	done   chan error
}

func runController(b *controllertest.Bed) *runningController {
	b.T.Helper()
	return runControllerOn(b, b.St)
}

// runControllerOn runs the controller on another store than the bed's
// own (one that can be taken away).
func runControllerOn(b *controllertest.Bed, st store.Store) *runningController {
	t := b.T
	t.Helper()
	rc := &runningController{logs: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	go func() {
		rc.done <- Run(ctx, b.M, st, RunOptions{StartTimeout: 20 * time.Second, Logger: slog.New(slog.NewJSONHandler(rc.logs, nil))})
	}()
	controllertest.Eventually(t, 20*time.Second, "the controller ready", func() bool { return strings.Contains(rc.logs.String(), `"msg":"ready"`) })
	t.Cleanup(rc.stop)
	return rc
}

func (rc *runningController) stop() {
	if rc.cancel == nil {
		return
	}
	rc.cancel()
	rc.cancel = nil
	<-rc.done
}

// provider connects as pg on node-a through the SDK, as its provider loop
// would, and says words about its consumers.
type provider struct {
	t *testing.T
	m *sdk.Module
}

func providerOf(b *controllertest.Bed) *provider {
	t := b.T
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := sdk.Connect(ctx, statedir.Layout{Dir: b.Dir}.Credential(wire.ModuleUser("node-a", "pg")))
	if err != nil {
		t.Fatalf("connect as the provider: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &provider{t: t, m: m}
}

func (p *provider) say(key string, body any) {
	p.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.m.Publish(ctx, key, data); err != nil {
		p.t.Fatalf("publish %s: %v", key, err)
	}
}

func (p *provider) failing(consumer, node, class string) {
	p.say(wire.EventProvisionerFailing, wire.FailingEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Class: class, Since: since0})
}

func (p *provider) recovered(consumer, node string) {
	p.say(wire.EventProvisionerRecovered, wire.RecoveredEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Reason: wire.RecoveredSuccess})
}

// statusSays waits until the state directory's status names exactly want.
func statusSays(b *controllertest.Bed, want ...string) {
	b.T.Helper()
	var last []string
	controllertest.Eventually(b.T, 10*time.Second, "status naming "+strings.Join(want, ", "), func() bool {
		st, err := b.St.Status(context.Background())
		if err != nil {
			b.T.Fatal(err)
		}
		last = failingKeys(st)
		return strings.Join(last, " ") == strings.Join(want, " ")
	})
}

// TestTheControllerCarriesAFailingProvisionFromTheBusToStatus is design
// 19's last rule, the controller's half: provisioner.failing on the bus is
// named in status until provisioner.recovered, across a controller stopped
// while the words kept coming, with every event of EVENTS folded once.
func TestTheControllerCarriesAFailingProvisionFromTheBusToStatus(t *testing.T) {
	b := controllertest.NewBed(t, providerMesh(t))
	b.Start()
	ctl := runController(b)
	pg := providerOf(b)

	pg.failing("logger", "node-b", wire.ClassUnreachable)
	statusSays(b, "pg/node-b/logger:unreachable")

	// Words said while the controller is away are waiting for it.
	ctl.stop()
	pg.recovered("logger", "node-b")
	pg.failing("watcher", "node-a", wire.ClassRefused)
	runController(b)
	statusSays(b, "pg/node-a/watcher:refused")

	// Through is the stream's last sequence: every word folded in once.
	info, err := b.JS().Stream(controllertest.Ctx(t), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.St.Status(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Through != info.CachedInfo().State.LastSeq {
		t.Fatalf("status through %d, EVENTS ends at %d", st.Through, info.CachedInfo().State.LastSeq)
	}
	cons, err := b.JS().Consumer(controllertest.Ctx(t), wire.StreamEvents, wire.StatusConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if ci := cons.CachedInfo(); ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		t.Fatalf("status consumer: pending %d, ack pending %d, redelivered %d; want all 0", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
}

// TestAStatusThatCannotBeSavedLosesNothing: a delivery whose status cannot
// be written is asked again, and once the state directory takes writes the
// word is named.
func TestAStatusThatCannotBeSavedLosesNothing(t *testing.T) {
	b := controllertest.NewBed(t, providerMesh(t))
	b.Start()
	ctl := runController(b)
	pg := providerOf(b)

	// A directory where the status file goes: the rename onto it fails.
	blocker := statedir.Layout{Dir: b.Dir}.Status()
	if err := os.Remove(blocker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	pg.failing("logger", "node-b", wire.ClassTimeout)
	controllertest.Eventually(t, 10*time.Second, "the failed save logged", func() bool {
		return strings.Contains(ctl.logs.String(), "status not saved")
	})
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	statusSays(b, "pg/node-b/logger:timeout")
}

// TestTheStatusFollowsARecreatedEVENTS: EVENTS deleted and created again
// numbers its events from 1, below what the status has folded; the next
// controller sees another stream and folds it from its start, keeping what
// it already named failing.
func TestTheStatusFollowsARecreatedEVENTS(t *testing.T) {
	b := controllertest.NewBed(t, providerMesh(t))
	b.Start()
	ctl := runController(b)
	pg := providerOf(b)
	pg.failing("logger", "node-b", wire.ClassUnreachable)
	pg.failing("logger", "node-b", wire.ClassTimeout)
	statusSays(b, "pg/node-b/logger:timeout")
	ctl.stop()

	if err := b.JS().DeleteStream(controllertest.Ctx(t), wire.StreamEvents); err != nil {
		t.Fatal(err)
	}
	runController(b) // asserts EVENTS and its consumers anew
	pg.failing("watcher", "node-a", wire.ClassRefused)
	statusSays(b, "pg/node-a/watcher:refused", "pg/node-b/logger:timeout")

	info, err := b.JS().Stream(controllertest.Ctx(t), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.St.Status(controllertest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if ci := info.CachedInfo(); st.Through != ci.State.LastSeq || !st.EventsCreated.Equal(ci.Created) {
		t.Fatalf("status through %d of EVENTS created %s; the stream ends at %d, created %s", st.Through, st.EventsCreated, ci.State.LastSeq, ci.Created)
	}
}

// awayFiles is the bed's store, taken away at will: while away, every
// update fails as a database stopped would.
type awayFiles struct {
	store.Store
	away atomic.Bool
}

func (s *awayFiles) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.away.Load() {
		return fmt.Errorf("save: %w: the test took it away", store.ErrStoreUnavailable)
	}
	return s.Store.Update(ctx, fn)
}

// TestAStoreAwayLosesNoEvent is the status fold against a real server with
// its store away: the word is held (nak'd with a delay, redelivered), never
// acknowledged while unsaved, and named once the store is back.
func TestAStoreAwayLosesNoEvent(t *testing.T) {
	b := controllertest.NewBed(t, providerMesh(t))
	b.Start()
	st := &awayFiles{Store: b.St}
	ctl := runControllerOn(b, st)
	pg := providerOf(b)

	st.away.Store(true)
	pg.failing("logger", "node-b", wire.ClassTimeout)
	controllertest.Eventually(t, 10*time.Second, "the store's absence logged twice", func() bool {
		return strings.Count(ctl.logs.String(), "the store is unavailable") >= 2
	})
	cons, err := b.JS().Consumer(controllertest.Ctx(t), wire.StreamEvents, wire.StatusConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if ci := cons.CachedInfo(); ci.AckFloor.Stream != 0 || ci.NumRedelivered == 0 && ci.NumAckPending == 0 {
		t.Fatalf("while the store is away: expected the word held, unacknowledged; ack floor %d, ack pending %d, redelivered %d",
			ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered)
	}
	if s, err := b.St.Status(controllertest.Ctx(t)); err != nil || len(s.Failing) != 0 {
		t.Fatalf("the store changed while away: %+v (%v)", s, err)
	}
	st.away.Store(false)
	statusSays(b, "pg/node-b/logger:timeout")
	controllertest.Eventually(t, 10*time.Second, "the word acknowledged", func() bool {
		ci, err := cons.Info(controllertest.Ctx(t))
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
}

// since0 is when the failing provisions the tests say began.
var since0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// failingKeys names each failing provision of s with its class.
func failingKeys(s store.Status) []string {
	var out []string
	for _, f := range s.Failing {
		out = append(out, f.Provider+"/"+f.Node+"/"+f.Consumer+":"+f.Class)
	}
	return out
}
