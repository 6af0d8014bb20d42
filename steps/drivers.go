package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/conformance"
	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/conformance/fixture"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
)

// How long a driver's command may take in the bed.
const (
	driverReady = time.Minute
	driverRun   = 2 * time.Minute
	// driverListen is how long a consuming or serving driver stays up; the
	// scenario stops it as soon as it ends.
	driverListen = 90 * time.Second
	// driverCount is more events than a consuming driver is ever sent: it
	// runs until it is stopped.
	driverCount = 1000
)

// drivers is what a scenario ran of the conformance drivers (and of the
// programs started the same way): each container, stopped at teardown,
// and what the last command run to its end printed.
type drivers struct {
	running []harness.Program
	last    []proto.Line
}

// fixtures are the bed's fixtures, on this side of the drivers.
func (w *World) fixtures() fixture.Dir { return fixture.Dir(w.fixturesDir()) }

func (w *World) fixturesDir() string { return w.path("fixtures") }

// inDriver is where a driver finds the fixture name.
func inDriver(name string) string { return harness.DriverFixtures + "/" + name }

// registry is the conformance registry, read once.
func (w *World) registry() (*conformance.Registry, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reg == nil {
		r, err := conformance.Load()
		if err != nil {
			return nil, err
		}
		w.reg = r
	}
	return w.reg, nil
}

// driverImage ensures the image of implementation's driver.
func (s *scenario) driverImage(ctx context.Context, implementation string) (string, error) {
	reg, err := s.w.registry()
	if err != nil {
		return "", err
	}
	impl, ok := reg.Implementation(implementation)
	if !ok {
		return "", fmt.Errorf("no implementation %q in the registry", implementation)
	}
	modules, err := capability[harness.ModuleRunner](s.r)
	if err != nil {
		return "", err
	}
	return modules.DriverImage(ctx, impl)
}

// driverRunOptions are the knobs of one driver command beyond the command.
type driverRunOptions struct {
	cred        *wire.Credential  // instead of the module's NATS credential
	fingerprint string            // replaces the credential's pin
	env         map[string]string // the driver's environment
}

// startDriver runs one command of implementation's driver with the
// credential of module on node, and returns at once.
func (s *scenario) startDriver(ctx context.Context, implementation, module, node string, o driverRunOptions, cmd proto.Command) (harness.Program, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	image, err := s.driverImage(ctx, implementation)
	if err != nil {
		return nil, err
	}
	var cred wire.Credential
	if o.cred != nil {
		cred = *o.cred
	} else if cred, err = r.cluster.Credential(ctx, wire.ModuleUser(node, module)); err != nil {
		return nil, err
	}
	if o.fingerprint != "" {
		cred.Fingerprint = o.fingerprint
	}
	modules, err := capability[harness.ModuleRunner](r)
	if err != nil {
		return nil, err
	}
	d, err := modules.StartDriver(ctx, harness.DriverOptions{
		Image:      image,
		Credential: cred.Marshal(),
		Fixtures:   s.w.fixturesDir(),
		Env:        o.env,
		Args:       cmd.Argv(),
	})
	if err != nil {
		return nil, err
	}
	s.drv.running = append(s.drv.running, d)
	return d, nil
}

// runDriver runs one command to its end and keeps what it printed, which
// must be the protocol's: exit ExitRan, closed by one done line.
func (s *scenario) runDriver(ctx context.Context, implementation, module, node string, o driverRunOptions, cmd proto.Command) error {
	d, err := s.startDriver(ctx, implementation, module, node, o, cmd)
	if err != nil {
		return err
	}
	exit, lines, err := d.Wait(ctx, driverRun)
	if err != nil {
		return err
	}
	if exit != proto.ExitRan {
		logs, _ := d.Logs(ctx)
		return fmt.Errorf("expected the driver of %s to exit %d on %q, it exited %d:\n%s", implementation, proto.ExitRan, cmd.Argv(), exit, logs)
	}
	if _, err := proto.Closing(lines); err != nil {
		return fmt.Errorf("driver of %s on %q: %w: %v", implementation, cmd.Argv(), err, lines)
	}
	s.drv.last = lines
	return nil
}

// lastLine is the first line of kind T the last command printed.
func lastLine[T proto.Body](s *scenario) (T, error) {
	v, ok := proto.First[T](s.drv.last)
	if !ok {
		return v, fmt.Errorf("expected the driver to print a %q line, it printed %v", v.Kind(), s.drv.last)
	}
	return v, nil
}

// closing is the last command's done line.
func (s *scenario) closing() (proto.Done, error) {
	if len(s.drv.last) == 0 {
		return proto.Done{}, fmt.Errorf("no driver command ran to its end in this scenario")
	}
	return proto.Closing(s.drv.last)
}

// succeeded fails unless the last command's done line says it did.
func (s *scenario) succeeded(what string) error {
	done, err := s.closing()
	if err != nil {
		return err
	}
	if !done.OK {
		return fmt.Errorf("expected the %s to succeed, it failed: %s: %s", what, done.Class, done.Message)
	}
	return nil
}

// itIsRefusedAs: the last command failed, of the class the protocol
// names; with a fixture, its message carries the handler's.
func (s *scenario) itIsRefusedAs(class, messageFixture string) error {
	want := proto.Class(class)
	if !slices.Contains(proto.Classes, want) {
		return fmt.Errorf("the protocol has no class %q (it has %v)", class, proto.Classes)
	}
	done, err := s.closing()
	if err != nil {
		return err
	}
	if done.OK {
		return fmt.Errorf("expected a refusal of class %q, the driver succeeded: %v", class, s.drv.last)
	}
	if done.Class != want {
		return fmt.Errorf("expected a refusal of class %q, got %q: %s", class, done.Class, done.Message)
	}
	if messageFixture == "" {
		return nil
	}
	var f fixture.ToolError
	if err := s.w.fixtures().Read(messageFixture, &f); err != nil {
		return err
	}
	if !strings.Contains(done.Message, f.Failure) {
		return fmt.Errorf("expected the error to carry the handler's message %q, got %q", f.Failure, done.Message)
	}
	return nil
}

// stopDrivers ends what the scenario left running.
func (s *scenario) stopDrivers(ctx context.Context) {
	for _, d := range s.drv.running {
		_ = d.Stop(ctx)
	}
	s.drv.running = nil
}
