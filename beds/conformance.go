package beds

import "time"

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
	}
}
