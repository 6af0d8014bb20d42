package steps

import (
	"context"
	"fmt"

	"github.com/cucumber/godog"

	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/conformance/fixture"
)

// floor are the steps of the floor (@connection): a driver connects and
// says whom it took itself for. What it printed is the drivers' state.
type floor struct{ s *scenario }

func (s *scenario) bindFloor(sc *godog.ScenarioContext) {
	f := &floor{s: s}
	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)"$`, f.theDriverConnects)
	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)" pinning the fingerprint of "([^"]+)"$`, f.theDriverConnectsPinning)
	sc.Step(`^the driver of "([^"]+)" connects as "([^"]+)" on "([^"]+)" in the environment of "([^"]+)"$`, f.theDriverConnectsInEnvironment)
	sc.Step(`^it has taken the identity module "([^"]+)" on node "([^"]+)"$`, f.itHasTakenTheIdentity)
	sc.Step(`^the environment it reports is node "([^"]+)" and module "([^"]+)"$`, f.theEnvironmentItReports)
	sc.Step(`^it is refused as "([^"]+)"(?:, with the message of "([^"]+)")?$`, s.itIsRefusedAs)
}

func (f *floor) theDriverConnects(ctx context.Context, impl, module, node string) error {
	return f.s.runDriver(ctx, impl, module, node, driverRunOptions{}, proto.Connect{})
}

func (f *floor) theDriverConnectsPinning(ctx context.Context, impl, module, node, name string) error {
	var pin fixture.Pin
	if err := f.s.w.fixtures().Read(name, &pin); err != nil {
		return err
	}
	return f.s.runDriver(ctx, impl, module, node, driverRunOptions{fingerprint: pin.Fingerprint}, proto.Connect{})
}

func (f *floor) theDriverConnectsInEnvironment(ctx context.Context, impl, module, node, name string) error {
	var env fixture.Environment
	if err := f.s.w.fixtures().Read(name, &env); err != nil {
		return err
	}
	return f.s.runDriver(ctx, impl, module, node, driverRunOptions{env: env}, proto.Connect{})
}

func (f *floor) itHasTakenTheIdentity(module, node string) error {
	id, err := lastLine[proto.Identity](f.s)
	if err != nil {
		return err
	}
	if id.Module != module || id.Node != node {
		return fmt.Errorf("expected module %s on node %s, the driver took module %s on node %s", module, node, id.Module, id.Node)
	}
	return nil
}

func (f *floor) theEnvironmentItReports(node, module string) error {
	id, err := lastLine[proto.Identity](f.s)
	if err != nil {
		return err
	}
	if id.EnvNode != node || id.EnvModule != module {
		return fmt.Errorf("expected the environment overwritten to node %s, module %s; it is node %q, module %q", node, module, id.EnvNode, id.EnvModule)
	}
	return nil
}
