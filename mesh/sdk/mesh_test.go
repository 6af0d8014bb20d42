package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// Users of the sample mesh (features/testdata/mesh.yaml): sensor emits
// reading and alarm.raised and serves calibrate; logger consumes
// sensor.reading and sensor.alarm.> and uses catalog_tools, which catalog
// serves.
var (
	sensorUser  = wire.ModuleUser("node-a", "sensor")
	loggerUser  = wire.ModuleUser("node-b", "logger")
	catalogUser = wire.ModuleUser("node-a", "mesh-catalog")
	loggerCons  = wire.ModuleConsumer("node-b", "logger")
)

// testMesh is the sample mesh on the real nats-server in-process, its
// streams and consumers asserted by the controller's own code.
type testMesh struct {
	srv *natstest.Server
	// js is the controller's in the mesh account, where EVENTS and DEAD
	// are: it observes the server from outside.
	js jetstream.JetStream
}

func startMesh(tb testing.TB, p natsplane.Policy) *testMesh {
	tb.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := natstest.Start(tb, m)
	ctx := ctxFor(tb, 20*time.Second)
	tm := &testMesh{srv: srv}
	jss := natsplane.JetStreams{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		_, jss[srv.Creds[user].Account()] = tm.raw(tb, user)
	}
	if _, err := natsplane.Assert(ctx, jss, natsplane.DesiredState(m, p), nil); err != nil {
		tb.Fatalf("assert streams and consumers: %v", err)
	}
	tm.js = jss[wire.AccountMesh]
	return tm
}

// credFile writes user's credential document where a host would.
func (tm *testMesh) credFile(tb testing.TB, user string) string {
	tb.Helper()
	return writeCred(tb, tm.srv.Creds[user])
}

func writeCred(tb testing.TB, c wire.Credential) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "credential.json")
	if err := os.WriteFile(path, c.Marshal(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// connect connects user through the SDK; it is closed when the test ends.
func (tm *testMesh) connect(tb testing.TB, user string) *sdk.Module {
	tb.Helper()
	return connectAs(tb, user, tm.credFile(tb, user))
}

// connectAs connects user with the credential at path through the SDK;
// it is closed when the test ends. The identity variables are restored
// after the test, since Connect overwrites them.
func connectAs(tb testing.TB, user, path string) *sdk.Module {
	tb.Helper()
	for _, name := range []string{wire.EnvNode, wire.EnvModule} {
		tb.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	m, err := sdk.Connect(ctxFor(tb, 10*time.Second), path, sdk.WithLogger(testLogger(tb)))
	if err != nil {
		tb.Fatalf("connect as %s: %v", user, err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close %s: %v", user, err)
		}
	})
	return m
}

// raw is a plain nats.go connection as user, for what the SDK never sends.
func (tm *testMesh) raw(tb testing.TB, user string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := tm.srv.Dial(ctxFor(tb, 10*time.Second), user)
	if err != nil {
		tb.Fatalf("dial as %s: %v", user, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// consumer reads the logger's consumer as the controller sees it.
func (tm *testMesh) consumer(tb testing.TB) *jetstream.ConsumerInfo {
	tb.Helper()
	c, err := tm.js.Consumer(ctxFor(tb, 5*time.Second), wire.StreamEvents, loggerCons)
	if err != nil {
		tb.Fatalf("read consumer %s: %v", loggerCons, err)
	}
	return c.CachedInfo()
}

// settled waits until the logger's consumer has delivered and settled
// every message of EVENTS up to seq.
func (tm *testMesh) settled(t *testing.T, seq uint64) *jetstream.ConsumerInfo {
	t.Helper()
	var ci *jetstream.ConsumerInfo
	eventually(t, 10*time.Second, func() (bool, string) {
		ci = tm.consumer(t)
		return ci.AckFloor.Stream >= seq && ci.NumAckPending == 0,
			fmt.Sprintf("ack floor %d (want %d), %d pending", ci.AckFloor.Stream, seq, ci.NumAckPending)
	})
	return ci
}

// stored is the last message EVENTS holds on subject.
func (tm *testMesh) stored(t *testing.T, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := tm.js.Stream(ctxFor(t, 5*time.Second), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctxFor(t, 5*time.Second), subject)
	if err != nil {
		t.Fatalf("read %s from %s: %v", subject, wire.StreamEvents, err)
	}
	return msg
}

// testLogger sends the SDK's lines to the test's log.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, state)
		}
		<-tick.C
	}
}

// storedAt is the message EVENTS holds at seq, waiting for it.
func (tm *testMesh) storedAt(t *testing.T, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := tm.js.Stream(ctxFor(t, 5*time.Second), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var msg *jetstream.RawStreamMsg
	eventually(t, 10*time.Second, func() (bool, string) {
		msg, err = s.GetMsg(ctxFor(t, 5*time.Second), seq)
		return err == nil, fmt.Sprintf("EVENTS holds nothing at %d: %v", seq, err)
	})
	return msg
}
