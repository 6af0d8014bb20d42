package beds

import (
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// genesis is step 1: a mesh raised from nothing, the server standing on it.
func genesis() Bed {
	return Bed{
		Name:    "genesis",
		Step:    1,
		Aliases: []string{"genesis-broker"},
		Owner:   "bus",
		Summary: "a mesh raised from nothing: streams, composed users and permissions enforced by the server, monitoring guard, live reload without recreating the container",
		Features: []string{
			"1-genesis.feature",
		},
		// Cold image builds are not inside a bed (bedrun images, or the steps'
		// BeforeSuite); this covers raising the cluster once per scenario.
		Timeout: 15 * time.Minute,
		// The durability scenario proves that unacknowledged deliveries
		// come again, not production's 30 s before they do (the feature
		// says so).
		Topology: topology.Genesis().WithAMQP().WithControllerArgs("--events-ack-wait=5s"),
	}
}
