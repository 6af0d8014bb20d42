package beds

import (
	"time"

	meshconformance "github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/topology"
)

// conformance is step 3: design 19 per capability, per implementation.
func conformance() Bed {
	return Bed{
		Name:    "conformance",
		Step:    3,
		Owner:   "sdk",
		Summary: "design 19's fixtures produced and consumed byte for byte by every SDK, per capability, per implementation; a module needing what its SDK lacks refused at build time",
		Features: []string{
			"3-conformance.feature",
		},
		// Most scenarios publish into EVENTS and so raise a fresh cluster.
		Timeout: 25 * time.Minute,
		// The AMQP bus of today beside NATS, for the module built once
		// that runs on either (ADR 0039's test).
		Topology: topology.Genesis().WithAMQP(),
		// Every implementation listed for what it passes; what it does not claim has no
		// scenario (the feature's first scenario checks that against the registry).
		Matrix: &Matrix{
			Param:     "implementation",
			Tags:      capabilityTags(),
			Unclaimed: "not claimed",
		},
	}
}

// capabilityTags are the tags the feature marks each capability's scenarios with, in
// design 19's order.
func capabilityTags() []string {
	var out []string
	for _, c := range meshconformance.Capabilities {
		out = append(out, "@"+string(c))
	}
	return out
}
