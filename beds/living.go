package beds

import (
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// living is step 4: the mesh living on its bus, its controller's state in
// PostgreSQL, a host on each node enrolled with a token.
func living() Bed {
	return Bed{
		Name:    "living",
		Step:    4,
		Owner:   "controller",
		Summary: "the mesh living on its bus, each flow on NATS and, where it exists there, on AMQP alone: a node enrols over TLS with a claimed token, an upgrade rolls out, a spent token is refused",
		Features: []string{
			"4-living.feature",
		},
		// Raising the store, genesis and two enrolments per cluster, a
		// cluster per bus.
		Timeout: 20 * time.Minute,
		// A token keeps its user 10 s once spent or expired (30 s in
		// production): the @enrol scenarios wait it out.
		Topology: topology.Living().WithTokenGrace(10 * time.Second),
		// A flow that exists on both buses is an outline with a row per
		// bus; the person's client's flows are on NATS only.
		// On AMQP the controller puts every declaration again every 5 s
		// (30 s in production): @newest waits for it.
		OnBus: map[string]topology.Topology{topology.BusAMQP: topology.LivingOnAMQP().WithTokenGrace(10 * time.Second).WithControllerArgs("--declare-every=5s")},
		Matrix: &Matrix{
			Param:     "bus",
			Tags:      []string{"@enrol", "@upgrade", "@isolation", "@newest", "@store-away", "@dead-letter", "@catch-up", "@nak-reply", "@tools", "@builds", "@install"},
			Unclaimed: "not on this bus",
		},
	}
}
