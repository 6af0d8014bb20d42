package beds

import (
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// adoption is step 2: a mesh already running on the bus it has today
// adopts the NATS server raised beside its broker, in place, in seat
// mesh-broker; nothing routes to it, and a predecessor's client on the
// same broker notices nothing.
func adoption() Bed {
	return Bed{
		Name:    "adoption",
		Step:    2,
		Owner:   "controller",
		Summary: "a mesh living on AMQP adopts the NATS server raised beside its broker, in place, in seat mesh-broker, holding its data and configuration; a second assignment is refused; nothing routes to it; the predecessor's client on the broker notices nothing, as its witness shows from outside",
		Features: []string{
			"2-adoption.feature",
		},
		// Raising the store, genesis on the broker, the predecessor and two
		// enrolments, and the NATS server beside, once per scenario that
		// adopts.
		Timeout: 10 * time.Minute,
		// @compat proves the compatibility broker's clients are observed
		// and shown, not production's 30 s between two observations (the
		// feature says so).
		Topology: topology.Adoption().WithControllerArgs("--live-every=5s"),
	}
}
