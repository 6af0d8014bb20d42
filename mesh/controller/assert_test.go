package controller

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/wire"
)

// snapshot is what the server holds: each stream's config and creation
// time, each consumer's config and creation time.
type snapshot struct {
	streams   map[string]jetstream.StreamInfo
	consumers map[string]jetstream.ConsumerInfo // "STREAM/name"
}

func take(t *testing.T, js controllertest.Routed) snapshot {
	t.Helper()
	ctx := controllertest.Ctx(t)
	s := snapshot{streams: map[string]jetstream.StreamInfo{}, consumers: map[string]jetstream.ConsumerInfo{}}
	for _, name := range wire.Streams {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		s.streams[name] = *st.CachedInfo()
		l := st.ListConsumers(ctx)
		for ci := range l.Info() {
			s.consumers[name+"/"+ci.Name] = *ci
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestAssertCreatesStreamsAndConsumers(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	rep, err := b.Assert(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Created) != 6+5 || len(rep.Corrected)+len(rep.Deleted) > 0 {
		t.Fatalf("expected 6 streams and 5 consumers created, got %+v", rep)
	}
	s := take(t, js)
	day := 24 * time.Hour
	for _, want := range []struct {
		name      string
		subjects  []string
		retention jetstream.RetentionPolicy
		maxAge    time.Duration
		perSubj   int64
	}{
		{wire.StreamDead, []string{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.EVENTS.*"}, jetstream.LimitsPolicy, 30 * day, -1},
		{wire.StreamControl, []string{"mesh.control.*.report", "mesh.control.enrol", "mesh.control.built", "mesh.control.push", "mesh.control.source.*.changed"}, jetstream.WorkQueuePolicy, 0, 256},
		{wire.StreamNodes, []string{"mesh.node.>"}, jetstream.LimitsPolicy, 0, 1},
		{wire.StreamBuilds, []string{"mesh.build.>"}, jetstream.WorkQueuePolicy, 0, -1},
		{wire.StreamArtifacts, []string{"mesh.artifact.>"}, jetstream.LimitsPolicy, 0, 1},
		{wire.StreamEvents, []string{"mesh.mod.*.event.>", "mesh.seat.*.event.>"}, jetstream.LimitsPolicy, 7 * day, -1},
	} {
		c := s.streams[want.name].Config
		if !slices.Equal(c.Subjects, want.subjects) || c.Retention != want.retention || c.Storage != jetstream.FileStorage ||
			c.MaxAge != want.maxAge || c.MaxMsgsPerSubject != want.perSubj {
			t.Errorf("stream %s: expected subjects %v %v file max_age %v per-subject %d, got %v %v %v %v %d",
				want.name, want.subjects, want.retention, want.maxAge, want.perSubj,
				c.Subjects, c.Retention, c.Storage, c.MaxAge, c.MaxMsgsPerSubject)
		}
	}
	if !s.streams[wire.StreamControl].Config.DiscardNewPerSubject {
		t.Error("CONTROL keeps the oldest of a full subject, not refusing the newest")
	}
	ev := s.streams[wire.StreamEvents].Config
	if ev.MaxBytes != 1<<30 || ev.Duplicates != 2*time.Minute {
		t.Errorf("EVENTS: expected max_bytes 1 GiB and a 2m duplicate window, got %d %v", ev.MaxBytes, ev.Duplicates)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range s.consumers {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"BUILDS/builder", "CONTROL/controller", "EVENTS/controller", "EVENTS/node-a_watcher", "EVENTS/node-b_logger"}) {
		t.Fatalf("consumers: got %v", got)
	}
	for key, ci := range s.consumers {
		c := ci.Config
		if c.Durable != ci.Name || c.AckPolicy != jetstream.AckExplicitPolicy || c.DeliverPolicy != jetstream.DeliverAllPolicy || c.DeliverSubject != "" {
			t.Errorf("%s: expected a durable pull consumer, explicit ack, deliver all; got %+v", key, c)
		}
	}
	if c := s.consumers["BUILDS/builder"].Config; c.MaxDeliver != -1 || c.MaxAckPending != 1 || c.AckWait != 10*time.Second {
		t.Errorf("BUILDS/builder: expected unlimited deliveries, one build at a time, a 10 s ack wait; got %+v", c)
	}
	if c := s.streams[wire.StreamArtifacts].Config; !c.AllowDirect || c.Discard != jetstream.DiscardOld {
		t.Errorf("ARTIFACTS: expected direct gets allowed and the oldest discarded, got %+v", c)
	}
	if c := s.consumers["CONTROL/controller"].Config; c.MaxDeliver != -1 {
		t.Errorf("CONTROL/controller: expected unlimited deliveries, got %d", c.MaxDeliver)
	}
	if c := s.consumers["EVENTS/controller"].Config; c.MaxDeliver != -1 || c.MaxAckPending != 1 ||
		!slices.Equal(natsplane.ConsumerFilters(c), []string{"mesh.mod.*.event.provisioner.failing", "mesh.mod.*.event.provisioner.recovered"}) {
		t.Errorf("EVENTS/controller: expected the provisioner status events, one at a time, never given up; got %v %d %d", natsplane.ConsumerFilters(c), c.MaxAckPending, c.MaxDeliver)
	}
	lg := s.consumers["EVENTS/node-b_logger"].Config
	if got := natsplane.ConsumerFilters(lg); !slices.Equal(got, []string{"mesh.mod.sensor.event.alarm.>", "mesh.mod.sensor.event.reading"}) ||
		lg.MaxDeliver != 5 || lg.AckWait != 30*time.Second {
		t.Errorf("EVENTS/node-b_logger: expected its two filters, max_deliver 5, ack_wait 30s; got %v %d %v", got, lg.MaxDeliver, lg.AckWait)
	}
	// sensor.alarm.raised is covered by sensor.alarm.>: one filter, since
	// the server refuses overlapping ones.
	if got := natsplane.ConsumerFilters(s.consumers["EVENTS/node-a_watcher"].Config); !slices.Equal(got, []string{"mesh.mod.sensor.event.alarm.>"}) {
		t.Errorf("EVENTS/node-a_watcher: got filters %v", got)
	}
}

func TestSecondAssertChangesNothing(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	before := take(t, js)
	rep, err := b.Assert(js)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() {
		t.Fatalf("expected no change, got %+v", rep)
	}
	after := take(t, js)
	for name, st := range before.streams {
		a := after.streams[name]
		if !st.Created.Equal(a.Created) || !sameJSON(t, st.Config, a.Config) {
			t.Errorf("stream %s changed by a second assertion", name)
		}
	}
	if len(after.consumers) != len(before.consumers) {
		t.Fatalf("consumer set changed: %d → %d", len(before.consumers), len(after.consumers))
	}
	for key, ci := range before.consumers {
		a, ok := after.consumers[key]
		if !ok || !ci.Created.Equal(a.Created) || !sameJSON(t, ci.Config, a.Config) {
			t.Errorf("consumer %s changed by a second assertion", key)
		}
	}
}

func TestDriftIsCorrected(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Ctx(t)
	before := take(t, js)
	ev := before.streams[wire.StreamEvents].Config
	ev.MaxAge = time.Hour
	if _, err := js.UpdateStream(ctx, ev); err != nil {
		t.Fatal(err)
	}
	lg := before.consumers["EVENTS/node-b_logger"].Config
	lg.MaxDeliver = 9
	lg.FilterSubject, lg.FilterSubjects = "mesh.mod.sensor.event.reading", nil
	if _, err := js.UpdateConsumer(ctx, wire.StreamEvents, lg); err != nil {
		t.Fatal(err)
	}

	rep, err := b.Assert(js)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stream EVENTS [max_age]", "consumer EVENTS/node-b_logger [filter_subjects max_deliver]"}
	if !slices.Equal(rep.Corrected, want) || len(rep.Created)+len(rep.Deleted) > 0 {
		t.Fatalf("expected corrected %v, got %+v", want, rep)
	}
	after := take(t, js)
	if got := after.streams[wire.StreamEvents].Config.MaxAge; got != 7*24*time.Hour {
		t.Errorf("EVENTS max_age: expected 168h, got %v", got)
	}
	a := after.consumers["EVENTS/node-b_logger"]
	if a.Config.MaxDeliver != 5 || len(natsplane.ConsumerFilters(a.Config)) != 2 {
		t.Errorf("node-b_logger not corrected: %+v", a.Config)
	}
	if !a.Created.Equal(before.consumers["EVENTS/node-b_logger"].Created) {
		t.Error("node-b_logger was recreated, expected an update in place")
	}
	if rep, err := b.Assert(js); err != nil || rep.Changed() {
		t.Fatalf("expected the corrected state to be stable, got %+v %v", rep, err)
	}
}

func TestDriftThatCannotBeUpdatedIsRefused(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	ctx := controllertest.Ctx(t)
	// CONTROL made by someone else with limits retention, and node-b's
	// consumer with the wrong deliver policy; EVENTS also drifted on an
	// updatable field, which must NOT be corrected while anything is refused.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: wire.StreamControl, Subjects: []string{wire.SubjectControlAll}, Storage: jetstream.FileStorage, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p := natsplane.DefaultPolicy()
	p.EventsMaxAge = time.Hour
	if _, err := natsplane.Assert(ctx, js.JetStreams, natsplane.DesiredState(b.M, p), nil); err == nil {
		t.Fatal("expected CONTROL's retention to be refused")
	} else if !errors.Is(err, ErrDrift) || !strings.Contains(err.Error(), "stream CONTROL: retention: expected WorkQueue, got Limits") {
		t.Fatalf("expected ErrDrift naming CONTROL's retention, expected vs actual; got %v", err)
	}
	if _, err := js.Stream(ctx, wire.StreamEvents); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("a refused assertion created EVENTS: %v", err)
	}

	if err := js.DeleteStream(ctx, wire.StreamControl); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, wire.StreamEvents, "node-b_logger"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{
		Durable: "node-b_logger", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
		FilterSubjects: []string{"mesh.mod.sensor.event.reading", "mesh.mod.sensor.event.alarm.>"}, MaxDeliver: 5,
	}); err != nil {
		t.Fatal(err)
	}
	ev, _ := js.Stream(ctx, wire.StreamEvents)
	_, err := natsplane.Assert(ctx, js.JetStreams, natsplane.DesiredState(b.M, p), nil)
	if !errors.Is(err, ErrDrift) || !strings.Contains(err.Error(), "consumer EVENTS/node-b_logger: deliver_policy: expected all, got new") {
		t.Fatalf("expected ErrDrift naming node-b_logger's deliver policy; got %v", err)
	}
	ev2, _ := js.Stream(ctx, wire.StreamEvents)
	if ev2.CachedInfo().Config.MaxAge != ev.CachedInfo().Config.MaxAge {
		t.Fatal("a refused assertion corrected EVENTS anyway")
	}
}

func TestConsumerNoLongerDescribedIsDeleted(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	js := b.JS()
	ctx := controllertest.Ctx(t)
	if _, err := b.Assert(js); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{Durable: "node-z_ghost", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	// node-b no longer runs the logger.
	m2 := *b.M
	m2.Nodes = slices.Clone(b.M.Nodes)
	m2.Nodes[1].Modules = nil
	b.M = controllertest.Revalidate(t, &m2)

	rep, err := b.Assert(js)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"consumer EVENTS/node-b_logger", "consumer EVENTS/node-z_ghost"}; !slices.Equal(rep.Deleted, want) {
		t.Fatalf("expected deleted %v, got %+v", want, rep)
	}
	for _, name := range []string{"node-b_logger", "node-z_ghost"} {
		if _, err := js.Consumer(ctx, wire.StreamEvents, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("%s: expected it gone, got %v", name, err)
		}
	}
	if _, err := js.Consumer(ctx, wire.StreamEvents, "node-a_watcher"); err != nil {
		t.Errorf("node-a_watcher deleted along: %v", err)
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// TestAFloodFillsItsOwnSubjectOfControlNotTheStream: with nothing taken
// from CONTROL (a controller away), a host publishing reports past the
// per-subject bound has the next refused, while another host's report, a
// push and an enrolment claim are still taken (issue 18: one principal's
// junk starved everybody's). The refused report is the flooder's to keep.
func TestAFloodFillsItsOwnSubjectOfControlNotTheStream(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	b.Start()
	b.Watch()
	if _, err := b.Assert(b.JS()); err != nil {
		t.Fatal(err)
	}
	per := natsplane.DefaultPolicy().ControlPerSubject
	publisher := func(user string) jetstream.JetStream {
		nc, err := b.Dial(user)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	// Reports near the largest CONTROL takes, until one is refused: with
	// no bound of its subject's, the stream's bytes ran out first.
	flooder := publisher(wire.HostUser("node-a"))
	big := []byte(`"` + strings.Repeat("x", 200<<10) + `"`)
	limit := natsplane.DefaultPolicy().Bytes[wire.StreamControl] / int64(len(big))
	var refused error
	sent := int64(0)
	for ; sent <= limit+1 && refused == nil; sent++ {
		_, refused = flooder.Publish(controllertest.Ctx(t), wire.NodeReport("node-a"), big)
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum messages per subject") || sent-1 != per {
		t.Fatalf("expected report %d refused at its subject's bound, got report %d refused with %v", per+1, sent, refused)
	}
	if _, err := publisher(wire.HostUser("node-b")).Publish(controllertest.Ctx(t), wire.NodeReport("node-b"), []byte(`{}`)); err != nil {
		t.Fatalf("another host's report, with node-a's subject full: %v", err)
	}
	if _, err := publisher(wire.ControllerUser).Publish(controllertest.Ctx(t), wire.SubjectPush, []byte(`{}`)); err != nil {
		t.Fatalf("a push, with node-a's subject full: %v", err)
	}
	tok := b.Issue("node-b")
	var claimer *nats.Conn
	controllertest.Eventually(t, 10*time.Second, "the token's user logs in", func() bool {
		var err error
		claimer, err = link.Dial(controllertest.Ctx(t), tok)
		return err == nil
	})
	defer claimer.Close()
	cjs, err := jetstream.New(claimer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cjs.Publish(controllertest.Ctx(t), wire.SubjectEnrol, []byte(`{}`)); err != nil {
		t.Fatalf("an enrolment claim, with node-a's subject full: %v", err)
	}
}
