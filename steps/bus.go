package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// A scenario's bus: a flow that exists on both buses is an outline with a
// row per bus ("on <bus>"), raised on the bed's topology for that bus
// (beds.Bed.TopologyOn); every check below asks the bus the mesh is on,
// from outside, in its own terms.

func (s *scenario) aMeshRaisedFromNothingOn(ctx context.Context, file, bus string) error {
	return s.raiseOn(ctx, file, bus, false)
}

// aMeshWithItsBuildPath raises the bed's cluster on bus with its build
// path (the repository and the builder) raised with it.
func (s *scenario) aMeshWithItsBuildPath(ctx context.Context, file, bus string) error {
	return s.raiseOn(ctx, file, bus, true)
}

func (s *scenario) raiseOn(ctx context.Context, file, bus string, buildPath bool) error {
	top := topology.Genesis()
	if b, _, ok := beds.Current(ctx); ok {
		var err error
		if top, err = b.TopologyOn(bus); err != nil {
			return err
		}
	} else if bus != topology.BusNATS {
		return fmt.Errorf("no bed says how to raise a mesh on %s", bus)
	}
	if buildPath {
		if !top.Has(topology.KindSource) || !top.Has(topology.KindBuilder) {
			return fmt.Errorf("the bed's cluster on %s has no build path (a source and a builder) to raise", bus)
		}
		top = top.WithBuildPath()
	}
	r, err := s.w.acquire(ctx, s.w.path(file), top, beds.ArtifactDir(ctx))
	if err != nil {
		return err
	}
	s.r, s.bus = r, bus
	if bus == topology.BusAMQP {
		// Raised with the cluster: this only hands it over.
		return r.raiseAMQP(ctx)
	}
	return nil
}

// onAMQP says whether the scenario's mesh is on AMQP.
func (s *scenario) onAMQP() bool { return s.bus == topology.BusAMQP }

// openConnections are the connections the mesh's bus has open: the NATS
// server's /connz (asked from the private network), or the broker's own
// list.
func (s *scenario) openConnections(ctx context.Context) ([]observe.Connection, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	if !s.onAMQP() {
		body, err := s.monitor(ctx, observe.ConnzURL(r.mesh.Bus.Monitor, r.mesh.Bus.MonitorPort, "open"))
		if err != nil {
			return nil, err
		}
		return observe.Connections(body)
	}
	if r.amqp == nil {
		return nil, fmt.Errorf("the mesh is on AMQP and no broker was handed over")
	}
	body, err := r.amqp.Connections(ctx, observe.AMQPConnectionsColumns...)
	if err != nil {
		return nil, err
	}
	return observe.AMQPConnections(body)
}

// busAddress is where the mesh's bus is reached from this host: the NATS
// server's or the broker's TLS port, published on the loopback (a
// credential names the bus as the private network knows it; dial here,
// check that name).
func (s *scenario) busAddress(ctx context.Context, r *raised) (string, error) {
	if !s.onAMQP() {
		return r.cluster.BusAddress(ctx)
	}
	if r.amqp == nil {
		return "", fmt.Errorf("the mesh is on AMQP and no broker was handed over")
	}
	return r.amqp.Address(ctx)
}

// moduleOn connects as module on node through the SDK, on the module's
// credential as the controller holds it, its URL naming the bus's port
// published on this host (the broker's and the server's certificates
// carry the loopback's names). It is closed when the scenario ends.
func (s *scenario) moduleOn(ctx context.Context, node, module string, opts ...sdk.Option) (*sdk.Module, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	cred, err := r.cluster.Credential(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return nil, err
	}
	path, err := s.publishedCredential(ctx, r, cred)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	m, err := sdk.Connect(cctx, path, append([]sdk.Option{sdk.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect as %s on %s: %w", module, node, err)
	}
	s.cleanups = append(s.cleanups, func() { _ = m.Close() })
	return m, nil
}

// failOnAMQP emits one event of emitter with key and has module on node
// fail every delivery of it, through the SDK as the module's own
// handler would (each failure asks for it again, after the SDK's growing
// delay, from failedFirstWaits), until the broker has delivered it as
// often as the mesh lets it (amqpdefs.DefaultMaxDeliver) and dead-letters
// it.
func (s *scenario) failOnAMQP(ctx context.Context, module, node, emitter, key string) error {
	consumer, err := s.moduleOn(ctx, node, module, sdk.WithRedelivery(failedFirstWaits))
	if err != nil {
		return err
	}
	id := wire.NewID()
	var mu sync.Mutex
	delivered := 0
	if err := consumer.Subscribe(emitter+"."+key, func(_ context.Context, ev sdk.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if ev.ID == id {
			delivered++
		}
		return errors.New("failing every delivery, on purpose")
	}); err != nil {
		return err
	}
	e, err := s.moduleOn(ctx, nodeOf(s.r.mesh, emitter), emitter)
	if err != nil {
		return err
	}
	if _, err := e.Publish(ctx, key, []byte(`{"value":1}`), sdk.WithEventID(id)); err != nil {
		return fmt.Errorf("%s emits %s: %w", emitter, key, err)
	}
	s.ro.emitted = observe.Acked{ID: id}
	// The SDK's delays (250 ms doubling: 0.25 s, 0.5 s, 1 s, 2 s) put the
	// last delivery about 4 s after the first.
	return eventually(ctx, 45*time.Second, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if delivered < amqpdefs.DefaultMaxDeliver {
			return fmt.Errorf("expected %s delivered %d times to %s, it was %d times", id, amqpdefs.DefaultMaxDeliver, module, delivered)
		}
		beds.Logf(ctx, "%s failed %d deliveries of %s", module, delivered, id)
		return nil
	})
}

// failedFirstWaits is the SDK's first wait after a failed delivery where
// a scenario fails every delivery (sdk.WithRedelivery; 1 s by default):
// it proves the deliveries and the dead letter, not the outage they ride
// out. On AMQP the SDK does not know the queue's delivery limit, so it
// waits after the last delivery too (4 s from this) before the broker
// dead-letters the event.
const failedFirstWaits = 250 * time.Millisecond

// publishedCredential writes cred into a file of the scenario's, its URL
// naming the mesh's bus as this host reaches it (the port published on
// the loopback, which the server's and the broker's certificates name),
// and returns the file's path.
func (s *scenario) publishedCredential(ctx context.Context, r *raised, cred wire.Credential) (string, error) {
	addr, err := s.busAddress(ctx, r)
	if err != nil {
		return "", err
	}
	cred.URL = wire.BusURL(cred.User(), cred.Password(), addr)
	if s.onAMQP() {
		cred.URL = wire.AMQPBusURL(cred.User(), cred.Password(), addr)
	}
	dir, err := os.MkdirTemp("", "mesh-credential-")
	if err != nil {
		return "", err
	}
	s.cleanups = append(s.cleanups, func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "credential.json")
	if err := os.WriteFile(path, cred.Marshal(), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
