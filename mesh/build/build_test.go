package build_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/build"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

var program = []byte("\x7fELF the toolchain's sensor program")

// builder runs build.Run as the builder, with its grants alone, until the
// test ends or stop is called; stop waits for Run and returns its error.
type builder struct {
	seen   *buildtest.Violations
	logs   *testutil.SyncBuffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startBuilder(t *testing.T, bed *buildtest.Bed, name, toolchain string) *builder {
	t.Helper()
	b := &builder{seen: buildtest.NewViolations(), logs: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	nc := bed.Dial(buildtest.Builder, b.seen.Handler())
	bus, err := natsplane.NewBuilder(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() {
		b.done <- build.Run(ctx, build.Options{
			Bus:        bus,
			Key:        nc.Opts.Password,
			Toolchain:  toolchain,
			Name:       name,
			Log:        slog.New(slog.NewJSONHandler(b.logs, nil)),
			RetryDelay: 300 * time.Millisecond,
			Poll:       time.Second,
		})
	}()
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("builder %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("builder %s logged:\n%s", name, b.logs.String())
		}
	})
	return b
}

func (b *builder) stop() error {
	b.once.Do(func() {
		b.cancel()
		select {
		case b.err = <-b.done:
		case <-time.After(10 * time.Second):
			b.err = errors.New("Run did not return within 10s of its context ending")
		}
	})
	return b.err
}

// TestBuildsARequest: a request is built into an artifact whose provenance
// is that revision, stored in chunks a host reads back by direct get, the
// outcome recorded on CONTROL, the request acked — all with the builder's
// grants and nothing wider.
func TestBuildsARequest(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	// Large enough for several chunks.
	program := bytes.Repeat(program, 20000)
	content := strings.Repeat("sensor source r1\n", 20000)
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": content}, 0)
	b := startBuilder(t, bed, "builder-a", buildtest.Toolchain(t, program, "sensor"))

	req, err := buildtest.Request(ctx, js, "sensor", "r1")
	if err != nil {
		t.Fatal(err)
	}
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	if out.ID != req.ID || out.Outcome != wire.BuildSucceeded || out.Builder != "builder-a" || out.Chunks < 3 {
		t.Fatalf("expected %s built by builder-a in 3 chunks or more, got %+v", req.ID, out)
	}

	data, err := artifact.Fetch(ctx, bed.Dial(buildtest.Reader), out.Digest, out.Size)
	if err != nil {
		t.Fatalf("fetch the artifact: %v", err)
	}
	if !bytes.HasPrefix(data, program) {
		t.Fatal("expected the artifact to begin with the toolchain's program")
	}
	p, err := build.ReadProvenance(data)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != req.ID || string(p.Content) != content || p.Program != wire.Digest(program) {
		t.Fatalf("expected the provenance of %s with its content, got %s with %d bytes", req.ID, p.ID(), len(p.Content))
	}

	acked(t, js)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	if errs := b.seen.All(); len(errs) > 0 {
		t.Fatalf("expected the builder to use nothing beyond its grants, got %v", errs)
	}
}

// TestBuilderGrantsAreNarrow: the bed's builder is refused what it is not
// granted, so that the test above proves its grants enough.
func TestBuilderGrantsAreNarrow(t *testing.T) {
	bed := buildtest.Start(t)
	seen := buildtest.NewViolations()
	nc := bed.Dial(buildtest.Builder, seen.Handler())
	if err := nc.Publish(wire.SubjectBuildRequest, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	err := seen.Next(5 * time.Second)
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("expected a permissions violation publishing %s, got %v", wire.SubjectBuildRequest, err)
	}
}

// acked waits until BUILDS is empty and nothing is pending: the work queue
// drops a request once it is acked (or terminated).
func acked(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	buildtest.Eventually(t, 10*time.Second, "BUILDS empty and nothing pending", func() bool {
		n, err := buildtest.Count(buildtest.Context(t), js, wire.StreamBuilds, wire.SubjectBuildRequest)
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildtest.BuildsState(buildtest.Context(t), js)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0 && info.NumAckPending == 0
	})
}

func TestRevisionTheRepositoryLacksFails(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 0)
	b := startBuilder(t, bed, "builder-a", buildtest.Toolchain(t, program, "sensor"))
	if _, err := buildtest.Request(ctx, js, "sensor", "r9"); err != nil {
		t.Fatal(err)
	}
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	want := "revision r9 of sensor is not in repository modules: no file sensor/r9"
	if out.Outcome != wire.BuildFailed || out.Error != want || out.Digest != "" {
		t.Fatalf("expected a failed outcome saying %q, got %+v", want, out)
	}
	acked(t, js)
	if n, _ := buildtest.Count(ctx, js, wire.StreamArtifacts, wire.SubjectArtifactsAll); n != 0 {
		t.Fatalf("expected no artifact stored for a failed build, got %d chunks", n)
	}
	_ = b.stop()
	if errs := b.seen.All(); len(errs) > 0 {
		t.Fatalf("expected no asynchronous errors, got %v", errs)
	}
}

func TestToolchainWithoutTheModuleFails(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	buildtest.Repository(t, bed, map[string]string{"pump@r1": "v1"}, 0)
	toolchain := buildtest.Toolchain(t, program, "sensor")
	startBuilder(t, bed, "builder-a", toolchain)
	if _, err := buildtest.Request(ctx, js, "pump", "r1"); err != nil {
		t.Fatal(err)
	}
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	want := "toolchain " + toolchain + " has no program for module pump: no file pump"
	if out.Outcome != wire.BuildFailed || out.Error != want {
		t.Fatalf("expected a failed outcome saying %q, got %+v", want, out)
	}
	acked(t, js)
}

// TestTheSameBuildTwiceIsRecordedOnce: a build done twice (here, asked
// twice) makes the same artifact, and its outcome's message id makes the
// second outcome a duplicate.
func TestTheSameBuildTwiceIsRecordedOnce(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 0)
	startBuilder(t, bed, "builder-a", buildtest.Toolchain(t, program, "sensor"))
	for range 2 {
		if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
			t.Fatal(err)
		}
	}
	acked(t, js)
	info, err := buildtest.BuildsState(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 2 {
		t.Fatalf("expected both requests delivered, got the consumer at stream sequence %d", info.Delivered.Stream)
	}
	if n, err := buildtest.Outcomes(ctx, js); err != nil || n != 1 {
		t.Fatalf("expected CONTROL to hold the outcome once, got %d (%v)", n, err)
	}
	if n, err := buildtest.Count(ctx, js, wire.StreamArtifacts, wire.SubjectArtifactsAll); err != nil || n != 1 {
		t.Fatalf("expected the one chunk of the artifact stored once, got %d (%v)", n, err)
	}
}

// TestRepositoryAwayIsRetried: nobody answering for the repository is not
// the build's failure: the request is given back and built once the
// repository is there.
func TestRepositoryAwayIsRetried(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	startBuilder(t, bed, "builder-a", buildtest.Toolchain(t, program, "sensor"))
	if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
		t.Fatal(err)
	}
	buildtest.Eventually(t, 20*time.Second, "the request delivered again", func() bool {
		info, err := buildtest.BuildsState(ctx, js)
		return err == nil && info.NumRedelivered > 0
	})
	if n, err := buildtest.Outcomes(ctx, js); err != nil || n != 0 {
		t.Fatalf("expected no outcome while the repository is away, got %d (%v)", n, err)
	}
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 0)
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	if out.Outcome != wire.BuildSucceeded {
		t.Fatalf("expected the build to succeed once the repository answers, got %+v", out)
	}
	acked(t, js)
}

// TestMalformedRequestIsTerminated: what is not a build request is
// terminated with its reason, and the queue goes on.
func TestMalformedRequestIsTerminated(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	advisories := make(chan *nats.Msg, 4)
	ctl := bed.Dial(buildtest.Controller)
	sub, err := ctl.ChanSubscribe(wire.TerminatedAdvisoryOn(wire.StreamBuilds, wire.BuildsConsumer), advisories)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The server sends an advisory only to interest it already holds: the
	// builder terms within a millisecond of starting, so the subscription
	// must have reached the server before the request is published.
	if err := ctl.Flush(); err != nil {
		t.Fatal(err)
	}
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 0)
	startBuilder(t, bed, "builder-a", buildtest.Toolchain(t, program, "sensor"))
	bad := wire.BuildRequest{ID: "forged", Repo: buildtest.Repo, Module: "sensor", Revision: "r1"}
	if _, err := js.Publish(ctx, wire.SubjectBuildRequest, wire.Marshal(bad)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-advisories:
		var adv struct {
			StreamSeq uint64 `json:"stream_seq"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			t.Fatal(err)
		}
		if adv.StreamSeq != 1 || !strings.Contains(adv.Reason, `malformed build message: id "forged" is not "modules/sensor@r1"`) {
			t.Fatalf("expected request 1 terminated with its reason, got %s", m.Data)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("expected the malformed request terminated within 20s, got no advisory")
	}
	if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
		t.Fatal(err)
	}
	if out := buildtest.WaitOutcome(t, js, 20*time.Second); out.Outcome != wire.BuildSucceeded {
		t.Fatalf("expected the next request built, got %+v", out)
	}
	acked(t, js)
}

// TestStoppingGivesTheRequestBack: a builder stopped mid-build naks, so
// the next builder does not wait out the AckWait.
func TestStoppingGivesTheRequestBack(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	buildtest.Repository(t, bed, map[string]string{"sensor@r1": "v1"}, 2*time.Second)
	toolchain := buildtest.Toolchain(t, program, "sensor")
	first := startBuilder(t, bed, "builder-a", toolchain)
	if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
		t.Fatal(err)
	}
	buildtest.Eventually(t, 10*time.Second, "the request in builder-a's hands", func() bool {
		info, err := buildtest.BuildsState(ctx, js)
		return err == nil && info.NumAckPending == 1
	})
	if err := first.stop(); err != nil {
		t.Fatalf("expected Run to return nil when its context ends, got %v", err)
	}
	start := time.Now()
	startBuilder(t, bed, "builder-b", toolchain)
	out := buildtest.WaitOutcome(t, js, 20*time.Second)
	if out.Builder != "builder-b" || out.Outcome != wire.BuildSucceeded {
		t.Fatalf("expected builder-b to build it, got %+v", out)
	}
	if took := time.Since(start); took > buildtest.AckWait {
		t.Fatalf("expected the request back before the AckWait (%s), got it built after %s", buildtest.AckWait, took)
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	ctx := buildtest.Context(t)
	file := buildtest.Toolchain(t, program, "sensor") + "/sensor"
	var bus plane.Builder = unused{}
	const key = "pw-builder"
	cases := map[string]struct {
		o    build.Options
		says string
	}{
		"no connection":       {build.Options{Key: key, Toolchain: t.TempDir(), Name: "a"}, "no connection"},
		"no password":         {build.Options{Bus: bus, Toolchain: t.TempDir(), Name: "a"}, "no password"},
		"toolchain is a file": {build.Options{Bus: bus, Key: key, Toolchain: file, Name: "a"}, "not a directory"},
		"toolchain not there": {build.Options{Bus: bus, Key: key, Toolchain: "/nonexistent/toolchain", Name: "a"}, "toolchain"},
		"no name":             {build.Options{Bus: bus, Key: key, Toolchain: t.TempDir()}, "no builder name"},
	}
	for what, c := range cases {
		if err := build.Run(ctx, c.o); !errors.Is(err, build.ErrOptions) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: expected ErrOptions saying %q, got %v", what, c.says, err)
		}
	}
}

// unused is a builder's bus that Run must not reach: its options are
// refused first.
type unused struct{ plane.Builder }
