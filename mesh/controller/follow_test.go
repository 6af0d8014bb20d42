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
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// providerMesh is the sample with a provider, pg on node-a, whose loop
// says what it keeps failing.
func providerMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m := sampleMesh(t)
	m.Modules = append(m.Modules, meshdesc.Module{Name: "pg", Provides: []string{"database"}})
	m.Nodes[0].Modules = append(m.Nodes[0].Modules, "pg")
	return revalidate(t, m)
}

// runningController is Run in the background, with its log.
type runningController struct {
	logs   *testutil.SyncBuffer
	cancel context.CancelFunc
	done   chan error
}

func (b *bed) runController() *runningController {
	b.t.Helper()
	return b.runControllerOn(b.st)
}

// runControllerOn runs the controller on another store than the bed's
// own (one that can be taken away).
func (b *bed) runControllerOn(st Store) *runningController {
	t := b.t
	t.Helper()
	rc := &runningController{logs: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	go func() {
		rc.done <- Run(ctx, b.m, st, RunOptions{StartTimeout: 20 * time.Second, Logger: slog.New(slog.NewJSONHandler(rc.logs, nil))})
	}()
	eventually(t, 20*time.Second, "the controller ready", func() bool { return strings.Contains(rc.logs.String(), `"msg":"ready"`) })
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

func (b *bed) provider() *provider {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := sdk.Connect(ctx, Layout{b.dir}.Credential(wire.ModuleUser("node-a", "pg")))
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
func (b *bed) statusSays(want ...string) {
	b.t.Helper()
	var last []string
	eventually(b.t, 10*time.Second, "status naming "+strings.Join(want, ", "), func() bool {
		st, err := b.st.Status(context.Background())
		if err != nil {
			b.t.Fatal(err)
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
	b := newBed(t, providerMesh(t))
	b.start()
	ctl := b.runController()
	pg := b.provider()

	pg.failing("logger", "node-b", wire.ClassUnreachable)
	b.statusSays("pg/node-b/logger:unreachable")

	// Words said while the controller is away are waiting for it.
	ctl.stop()
	pg.recovered("logger", "node-b")
	pg.failing("watcher", "node-a", wire.ClassRefused)
	b.runController()
	b.statusSays("pg/node-a/watcher:refused")

	// Through is the stream's last sequence: every word folded in once.
	info, err := b.js().Stream(ctxT(t), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.st.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Through != info.CachedInfo().State.LastSeq {
		t.Fatalf("status through %d, EVENTS ends at %d", st.Through, info.CachedInfo().State.LastSeq)
	}
	cons, err := b.js().Consumer(ctxT(t), wire.StreamEvents, wire.StatusConsumer)
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
	b := newBed(t, providerMesh(t))
	b.start()
	ctl := b.runController()
	pg := b.provider()

	// A directory where the status file goes: the rename onto it fails.
	blocker := Layout{b.dir}.Status()
	if err := os.Remove(blocker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	pg.failing("logger", "node-b", wire.ClassTimeout)
	eventually(t, 10*time.Second, "the failed save logged", func() bool {
		return strings.Contains(ctl.logs.String(), "status not saved")
	})
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	b.statusSays("pg/node-b/logger:timeout")
}

// TestTheStatusFollowsARecreatedEVENTS: EVENTS deleted and created again
// numbers its events from 1, below what the status has folded; the next
// controller sees another stream and folds it from its start, keeping what
// it already named failing.
func TestTheStatusFollowsARecreatedEVENTS(t *testing.T) {
	b := newBed(t, providerMesh(t))
	b.start()
	ctl := b.runController()
	pg := b.provider()
	pg.failing("logger", "node-b", wire.ClassUnreachable)
	pg.failing("logger", "node-b", wire.ClassTimeout)
	b.statusSays("pg/node-b/logger:timeout")
	ctl.stop()

	if err := b.js().DeleteStream(ctxT(t), wire.StreamEvents); err != nil {
		t.Fatal(err)
	}
	b.runController() // asserts EVENTS and its consumers anew
	pg.failing("watcher", "node-a", wire.ClassRefused)
	b.statusSays("pg/node-a/watcher:refused", "pg/node-b/logger:timeout")

	info, err := b.js().Stream(ctxT(t), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.st.Status(ctxT(t))
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
	Store
	away atomic.Bool
}

func (s *awayFiles) Update(ctx context.Context, fn func(Tx) error) error {
	if s.away.Load() {
		return fmt.Errorf("save: %w: the test took it away", ErrStoreUnavailable)
	}
	return s.Store.Update(ctx, fn)
}

// TestAStoreAwayLosesNoEvent is the status fold against a real server with
// its store away: the word is held (nak'd with a delay, redelivered), never
// acknowledged while unsaved, and named once the store is back.
func TestAStoreAwayLosesNoEvent(t *testing.T) {
	b := newBed(t, providerMesh(t))
	b.start()
	st := &awayFiles{Store: b.st}
	ctl := b.runControllerOn(st)
	pg := b.provider()

	st.away.Store(true)
	pg.failing("logger", "node-b", wire.ClassTimeout)
	eventually(t, 10*time.Second, "the store's absence logged twice", func() bool {
		return strings.Count(ctl.logs.String(), "the store is unavailable") >= 2
	})
	cons, err := b.js().Consumer(ctxT(t), wire.StreamEvents, wire.StatusConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if ci := cons.CachedInfo(); ci.AckFloor.Stream != 0 || ci.NumRedelivered == 0 && ci.NumAckPending == 0 {
		t.Fatalf("while the store is away: expected the word held, unacknowledged; ack floor %d, ack pending %d, redelivered %d",
			ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered)
	}
	if s, err := b.st.Status(ctxT(t)); err != nil || len(s.Failing) != 0 {
		t.Fatalf("the store changed while away: %+v (%v)", s, err)
	}
	st.away.Store(false)
	b.statusSays("pg/node-b/logger:timeout")
	eventually(t, 10*time.Second, "the word acknowledged", func() bool {
		ci, err := cons.Info(ctxT(t))
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
}
