package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/cucumber/godog"

	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
)

// One module, either bus (ADR 0039; design 25 §8, §10 step 3;
// docs/conformance.md): a module built against the contract runs on the
// new runtime without a rebuild. Its state is the module's image and its
// runs.
type bothBuses struct {
	s              *scenario
	image, imageID string
	runs           []moduleRun
}

// moduleRun is one run of a module's image.
type moduleRun struct {
	d     harness.Program
	image string
	bus   string
}

// moduleServing is what the echo module logs once it serves its tool.
// The sample module is no driver: it speaks no protocol, and its log line
// is the only sign it is up (the call that follows is the assertion).
const moduleServing = `"msg":"serving"`

func (s *scenario) bindBothBuses(sc *godog.ScenarioContext) {
	b := &bothBuses{s: s}
	sc.Step(`^the mesh's AMQP bus is raised beside it, composed from the same description$`, b.theAMQPBusIsRaised)
	sc.Step(`^the module "([^"]+)" is built once into its image$`, b.theModuleIsBuiltOnce)
	sc.Step(`^that image runs as "([^"]+)" on "([^"]+)" with its (AMQP|NATS) credential$`, b.thatImageRuns)
	sc.Step(`^that image is stopped and runs again, unchanged, as "([^"]+)" on "([^"]+)" with its (AMQP|NATS) credential$`, b.thatImageRunsAgain)
	sc.Step(`^the driver of "([^"]+)" calls "([^".]+)\.([^"]+)" with (\{.*\}) as "([^"]+)" on "([^"]+)" over (AMQP|NATS)$`, b.theDriverCallsOver)
	sc.Step(`^both runs were of the image built once$`, b.bothRunsWereOfTheImage)
}

func (b *bothBuses) theAMQPBusIsRaised(ctx context.Context) error {
	r, err := b.s.cluster()
	if err != nil {
		return err
	}
	return r.raiseAMQP(ctx)
}

func (b *bothBuses) theModuleIsBuiltOnce(ctx context.Context, name string) error {
	r, err := b.s.cluster()
	if err != nil {
		return err
	}
	modules, err := capability[harness.ModuleRunner](r)
	if err != nil {
		return err
	}
	ref, err := modules.ModuleImage(ctx, name)
	if err != nil {
		return err
	}
	b.image = ref
	b.imageID, err = modules.ImageID(ctx, ref)
	return err
}

// credentialOn is the credential of module on node for bus.
func (b *bothBuses) credentialOn(ctx context.Context, bus, module, node string) (wire.Credential, error) {
	user := wire.ModuleUser(node, module)
	if bus == "AMQP" {
		if b.s.r.amqp == nil {
			return wire.Credential{}, errors.New("no AMQP bus raised in this scenario")
		}
		return b.s.r.amqp.Credential(user)
	}
	return b.s.r.cluster.Credential(ctx, user)
}

func (b *bothBuses) thatImageRuns(ctx context.Context, module, node, bus string) error {
	if b.image == "" {
		return errors.New("no module image built in this scenario")
	}
	cred, err := b.credentialOn(ctx, bus, module, node)
	if err != nil {
		return err
	}
	modules, err := capability[harness.ModuleRunner](b.s.r)
	if err != nil {
		return err
	}
	d, err := modules.StartDriver(ctx, harness.DriverOptions{Image: b.image, Credential: cred.Marshal(), Role: "module"})
	if err != nil {
		return err
	}
	b.s.drv.running = append(b.s.drv.running, d)
	if err := d.WaitLog(ctx, moduleServing, driverReady); err != nil {
		return err
	}
	image, err := d.Image(ctx)
	if err != nil {
		return err
	}
	b.runs = append(b.runs, moduleRun{d: d, image: image, bus: bus})
	return nil
}

func (b *bothBuses) thatImageRunsAgain(ctx context.Context, module, node, bus string) error {
	if len(b.runs) == 0 {
		return errors.New("the module has not run yet")
	}
	if err := b.runs[len(b.runs)-1].d.Stop(ctx); err != nil {
		return err
	}
	return b.thatImageRuns(ctx, module, node, bus)
}

func (b *bothBuses) theDriverCallsOver(ctx context.Context, impl, module, tool, args, caller, node, bus string) error {
	cred, err := b.credentialOn(ctx, bus, caller, node)
	if err != nil {
		return err
	}
	return b.s.runDriver(ctx, impl, caller, node, driverRunOptions{cred: &cred},
		proto.Call{Module: module, Tool: tool, Args: args, Timeout: 2 * callTimeout})
}

func (b *bothBuses) bothRunsWereOfTheImage() error {
	if len(b.runs) < 2 {
		return fmt.Errorf("expected two runs of the module, got %d", len(b.runs))
	}
	for _, run := range b.runs {
		if run.image != b.imageID {
			return fmt.Errorf("expected every run from image %s, the %s run was from %s", b.imageID, run.bus, run.image)
		}
	}
	return nil
}
