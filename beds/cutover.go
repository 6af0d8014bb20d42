package beds

import (
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// cutover is step 5: the mesh of the adoption bed moves from its broker
// to the NATS server it adopted, in one rollout, and the predecessor's
// client on the same broker notices nothing.
func cutover() Bed {
	return Bed{
		Name:    "cutover",
		Step:    5,
		Owner:   "controller",
		Summary: "a mesh on AMQP moves to the NATS server adopted beside its broker in one rollout (compose, prepare, switch, retire): every node reports on NATS after, nothing of the mesh is left on the broker, a node cut off during prepare stops it before anything switches, named; the predecessor's client notices nothing",
		Features: []string{
			"5-cutover.feature",
		},
		// The adoption bed's cluster; a cutover leaves it on NATS, so
		// each scenario that cuts over gets a cluster of its own after.
		Timeout:  15 * time.Minute,
		Topology: topology.Adoption(),
	}
}
