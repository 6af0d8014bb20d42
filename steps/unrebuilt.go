package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/cucumber/godog"

	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/mesh/wire"
)

// A module built once runs unchanged on either bus (design 25 §8, §10
// step 3; the test ADR 0039 sets): a module built against the
// contract runs on the new runtime without a rebuild.

// moduleServing is what the echo module logs once it serves its tool.
const moduleServing = `"msg":"serving"`

func (s *scenario) bindUnrebuiltModule(sc *godog.ScenarioContext) {
	sc.Step(`^the mesh's AMQP bus is raised beside it, composed from the same description$`, s.theAMQPBusIsRaised)
	sc.Step(`^the module "([^"]+)" is built once into its image$`, s.theModuleIsBuiltOnce)
	sc.Step(`^that image runs as "([^"]+)" on "([^"]+)" with its (AMQP|NATS) credential$`, s.thatImageRuns)
	sc.Step(`^that image is stopped and runs again, unchanged, as "([^"]+)" on "([^"]+)" with its (AMQP|NATS) credential$`, s.thatImageRunsAgain)
	sc.Step(`^the driver of "([^"]+)" calls "([^".]+)\.([^"]+)" with (\{.*\}) as "([^"]+)" on "([^"]+)" over (AMQP|NATS)$`, s.theDriverCallsOver)
	sc.Step(`^both runs were of the image built once$`, s.bothRunsWereOfTheImage)
}

func (s *scenario) theAMQPBusIsRaised(ctx context.Context) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	if r.amqp == nil {
		if r.amqp, err = r.cluster.RaiseAMQP(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) theModuleIsBuiltOnce(ctx context.Context, name string) error {
	r, err := s.cluster()
	if err != nil {
		return err
	}
	ref, err := r.cluster.EnsureImage(ctx, images.Module(name))
	if err != nil {
		return err
	}
	s.moduleImage = ref
	s.moduleImageID, err = r.cluster.ImageID(ctx, ref)
	return err
}

// credentialOn is the credential of module on node for bus.
func (s *scenario) credentialOn(bus, module, node string) (wire.Credential, error) {
	user := wire.ModuleUser(node, module)
	if bus == "AMQP" {
		if s.r.amqp == nil {
			return wire.Credential{}, errors.New("no AMQP bus raised in this scenario")
		}
		return s.r.amqp.Credential(user)
	}
	return s.r.cluster.Credential(user)
}

func (s *scenario) thatImageRuns(ctx context.Context, module, node, bus string) error {
	if s.moduleImage == "" {
		return errors.New("no module image built in this scenario")
	}
	cred, err := s.credentialOn(bus, module, node)
	if err != nil {
		return err
	}
	d, err := s.r.cluster.StartDriver(ctx, harness.DriverOptions{Image: s.moduleImage, Credential: cred.Marshal(), Role: "module"})
	if err != nil {
		return err
	}
	s.drivers = append(s.drivers, d)
	if err := d.WaitLog(ctx, moduleServing, driverReady); err != nil {
		return err
	}
	image, err := d.Image(ctx)
	if err != nil {
		return err
	}
	s.moduleRuns = append(s.moduleRuns, moduleRun{d: d, image: image, bus: bus})
	return nil
}

func (s *scenario) thatImageRunsAgain(ctx context.Context, module, node, bus string) error {
	if len(s.moduleRuns) == 0 {
		return errors.New("the module has not run yet")
	}
	if err := s.moduleRuns[len(s.moduleRuns)-1].d.Stop(ctx); err != nil {
		return err
	}
	return s.thatImageRuns(ctx, module, node, bus)
}

func (s *scenario) theDriverCallsOver(ctx context.Context, impl, module, tool, args, caller, node, bus string) error {
	image, err := s.driverImage(ctx, impl)
	if err != nil {
		return err
	}
	cred, err := s.credentialOn(bus, caller, node)
	if err != nil {
		return err
	}
	d, err := s.r.cluster.StartDriver(ctx, harness.DriverOptions{
		Image: image, Credential: cred.Marshal(), Fixtures: s.w.fixturesDir(),
		Args: []string{"call", "--module", module, "--tool", tool, "--args", args, "--timeout", "10s"},
	})
	if err != nil {
		return err
	}
	s.drivers = append(s.drivers, d)
	exit, lines, err := d.Wait(ctx, driverRun)
	if err != nil {
		return err
	}
	if exit != 0 {
		logs, _ := d.Logs(ctx)
		return fmt.Errorf("driver of %s exited %d:\n%s", impl, exit, logs)
	}
	s.lines = lines
	return nil
}

func (s *scenario) bothRunsWereOfTheImage() error {
	if len(s.moduleRuns) < 2 {
		return fmt.Errorf("expected two runs of the module, got %d", len(s.moduleRuns))
	}
	for _, run := range s.moduleRuns {
		if run.image != s.moduleImageID {
			return fmt.Errorf("expected every run from image %s, the %s run was from %s", s.moduleImageID, run.bus, run.image)
		}
	}
	return nil
}

// moduleRun is one run of a module's image.
type moduleRun struct {
	d     *harness.Driver
	image string
	bus   string
}
