package steps

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// natsCluster is a cluster whose bus is a nats-server in this process:
// what a reset reaches of a harness.Mesh. Any other method panics (the
// embedded interface is nil): the reset must not need it.
type natsCluster struct {
	harness.Mesh
	s *natstest.Server
}

func (c natsCluster) BusAddress(context.Context) (string, error) { return "", nil } // the credential's own
func (c natsCluster) UndoAll(context.Context) error              { return nil }
func (c natsCluster) Credential(_ context.Context, user string) (wire.Credential, error) {
	cred, ok := c.s.Creds[user]
	if !ok {
		return wire.Credential{}, fmt.Errorf("no user %s", user)
	}
	return cred, nil
}

// TestAResetPutsBackWhatAScenarioTouched: a scenario of a feature sharing
// clusters that published deliveries with ids of their own and drove its
// consumer leaves a cluster that reads as raised once EVENTS and DEAD are
// purged, and the next scenario gets it; one that left anything else
// behind, or whose feature does not share, leaves it to be torn down.
func TestAResetPutsBackWhatAScenarioTouched(t *testing.T) {
	consumer := wire.ModuleConsumer("node-b", "consumer")
	for _, tc := range []struct {
		name      string
		shared    bool
		scenario  func(ctx context.Context, t *testing.T, emitter, consuming jetstream.JetStream)
		purge     []string
		drove     []string
		offered   bool
		remaining uint64 // EVENTS' messages after the scenario's end
	}{
		{name: "deliveries handled by the consumer it drove", shared: true, purge: []string{wire.StreamEvents, wire.StreamDead}, drove: []string{consumer},
			scenario: func(ctx context.Context, t *testing.T, emitter, consuming jetstream.JetStream) {
				publish(ctx, t, emitter, 2)
				take(ctx, t, consuming, consumer, 1, true)
				take(ctx, t, consuming, consumer, 1, false) // the scenario ended before its ack
			}, offered: true},
		{name: "a consumer it did not say it drove delivered", shared: true, purge: []string{wire.StreamEvents},
			scenario: func(ctx context.Context, t *testing.T, emitter, consuming jetstream.JetStream) {
				publish(ctx, t, emitter, 1)
				take(ctx, t, consuming, consumer, 1, true)
			}},
		{name: "messages in a stream it did not say it stored in", shared: true, purge: []string{wire.StreamDead}, drove: []string{consumer},
			scenario: func(ctx context.Context, t *testing.T, emitter, consuming jetstream.JetStream) {
				publish(ctx, t, emitter, 1)
			}, remaining: 1},
		{name: "it does not share clusters, though another that leased the cluster did", purge: []string{wire.StreamEvents},
			scenario: func(ctx context.Context, t *testing.T, emitter, consuming jetstream.JetStream) {
				publish(ctx, t, emitter, 1)
			}, remaining: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "conformance.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			srv := natstest.Start(t, m)
			js := jetStreamAs(ctx, t, srv, wire.ControllerMeshUser)
			for _, name := range []string{wire.StreamEvents, wire.StreamDead} {
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: wire.StreamSubjects(name), MaxBytes: 1 << 20}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := js.CreateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatal(err)
			}

			w := New(Options{})
			r, sess := fakeRaised("abc123", "conformance.yaml")
			r.key, r.cluster = "k", natsCluster{s: srv}
			w.leased[r] = true
			s := &scenario{w: w, r: r, clients: map[string]*client{}, sharing: tc.shared}
			// As a scenario sharing clusters did when it first leased it.
			if err := s.readAsRaised(ctx); err != nil {
				t.Fatal(err)
			}
			tc.scenario(ctx, t, jetStreamAs(ctx, t, srv, wire.ModuleUser("node-a", "emitter")), jetStreamAs(ctx, t, srv, wire.ModuleUser("node-b", "consumer")))
			s.touched.stored(tc.purge...)
			for _, c := range tc.drove {
				s.touched.drove(c)
			}
			if _, err := s.after(ctx, &godog.Scenario{Name: tc.name}, nil); err != nil {
				t.Fatal(err)
			}

			offered := len(w.idle["k"]) == 1
			if offered != tc.offered || (sess.closed == 1) == tc.offered {
				t.Fatalf("expected the cluster offered to the next scenario: %v; got offered %v, torn down %d times", tc.offered, offered, sess.closed)
			}
			st, err := js.Stream(ctx, wire.StreamEvents)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().State.Msgs; got != tc.remaining {
				t.Fatalf("expected EVENTS to hold %d messages after the scenario, got %d", tc.remaining, got)
			}
		})
	}
}

func jetStreamAs(ctx context.Context, t *testing.T, s *natstest.Server, user string) jetstream.JetStream {
	t.Helper()
	c, err := observe.Dial(ctx, s.Creds[user], "")
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publish stores n deliveries as the emitter, each with an id of its own.
func publish(ctx context.Context, t *testing.T, emitter jetstream.JetStream, n int) {
	t.Helper()
	for i := range n {
		if _, err := emitter.Publish(ctx, "mesh.mod.emitter.event.reading", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
}

// take fetches n messages from consumer, acknowledging them or not.
func take(ctx context.Context, t *testing.T, js jetstream.JetStream, consumer string, n int, ack bool) {
	t.Helper()
	c, err := js.Consumer(ctx, wire.StreamEvents, consumer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range b.Messages() {
		got++
		if ack {
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != n {
		t.Fatalf("expected %d messages from %s, got %d", n, consumer, got)
	}
}
