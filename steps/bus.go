package steps

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/observe"
)

// A scenario's bus: a flow that exists on both buses is an outline with a
// row per bus ("on <bus>"), raised on the bed's topology for that bus
// (beds.Bed.TopologyOn); every check below asks the bus the mesh is on,
// from outside, in its own terms.

func (s *scenario) aMeshRaisedFromNothingOn(ctx context.Context, file, bus string) error {
	top := topology.Genesis()
	if b, _, ok := beds.Current(ctx); ok {
		var err error
		if top, err = b.TopologyOn(bus); err != nil {
			return err
		}
	} else if bus != topology.BusNATS {
		return fmt.Errorf("no bed says how to raise a mesh on %s", bus)
	}
	r, err := s.w.acquire(ctx, s.w.path(file), top, beds.ArtifactDir(ctx))
	if err != nil {
		return err
	}
	s.r, s.bus = r, bus
	if bus == topology.BusAMQP && r.amqp == nil {
		// Raised with the cluster: this only hands it over.
		if r.amqp, err = r.cluster.RaiseAMQP(ctx); err != nil {
			return err
		}
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
