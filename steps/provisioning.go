package steps

import (
	"context"
	"fmt"
	"slices"

	"github.com/cucumber/godog"

	proto "github.com/meshbus/mesh/conformance/driverproto"
)

// provisioning are the steps of @provisioning that run a driver: a grant
// read. (The provider's words to the controller are events, emitted by
// the events steps; status.go reads the controller's status.)
type provisioning struct{ s *scenario }

func (s *scenario) bindProvisioning(sc *godog.ScenarioContext) {
	p := &provisioning{s: s}
	sc.Step(`^the driver of "([^"]+)" reads the grant "([^"]+)"$`, p.theDriverReadsTheGrant)
	sc.Step(`^it yields, entry by entry, the module and node of "([^"]+)"$`, p.itYieldsTheGrant)
}

func (p *provisioning) theDriverReadsTheGrant(ctx context.Context, impl, name string) error {
	// Any module's credential will do: reading a grant touches no bus.
	return p.s.runDriver(ctx, impl, "server", "node-a", driverRunOptions{}, proto.ReadGrant{File: inDriver(name)})
}

func (p *provisioning) itYieldsTheGrant(name string) error {
	var want []proto.Grant
	if err := p.s.w.fixtures().Read(name, &want); err != nil {
		return err
	}
	got := proto.All[proto.Grant](p.s.drv.last)
	if !slices.Equal(got, want) {
		done, _ := p.s.closing()
		return fmt.Errorf("expected the grants %v, the driver read %v (done: %+v)", want, got, done)
	}
	return nil
}
