package steps

import "github.com/cucumber/godog"

// The conformance bed's steps (features/3-conformance.feature), one file
// per domain, each with its own state: claims.go (the registry and the
// build path), floor.go, events.go, tools.go, provisioning.go and
// bothbuses.go; drivers.go runs the drivers they all speak to through
// conformance/driverproto.
func (s *scenario) bindConformance(sc *godog.ScenarioContext) {
	s.bindClaims(sc)
	s.bindFloor(sc)
	s.bindEvents(sc)
	s.bindTools(sc)
	s.bindProvisioning(sc)
}
