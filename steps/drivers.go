package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/mesh/wire"
)

// How long a driver's command may take in the bed.
const (
	driverReady = time.Minute
	driverRun   = 2 * time.Minute
	// driverListen is how long a consuming or serving driver stays up; the
	// scenario stops it as soon as it ends.
	driverListen = 90 * time.Second
)

// fixture reads a fixture file of features/fixtures into v.
func (w *World) fixture(name string, v any) error {
	data, err := os.ReadFile(filepath.Join(w.fixturesDir(), name))
	if err != nil {
		return fmt.Errorf("read fixture: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read fixture %s: %w", name, err)
	}
	return nil
}

func (w *World) fixturesDir() string { return w.path("fixtures") }

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
	return s.r.cluster.EnsureImage(ctx, images.Driver(impl.Name, impl.Driver))
}

// driverRunOptions are the knobs of one driver command beyond its args.
type driverRunOptions struct {
	fingerprint string            // replaces the credential's pin
	env         map[string]string // the driver's environment
}

// startDriver runs one command of implementation's driver with the
// credential of module on node.
func (s *scenario) startDriver(ctx context.Context, implementation, module, node string, o driverRunOptions, args ...string) (*harness.Driver, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	image, err := s.driverImage(ctx, implementation)
	if err != nil {
		return nil, err
	}
	cred, err := r.cluster.Credential(wire.ModuleUser(node, module))
	if err != nil {
		return nil, err
	}
	if o.fingerprint != "" {
		cred.Fingerprint = o.fingerprint
	}
	d, err := r.cluster.StartDriver(ctx, harness.DriverOptions{
		Image:      image,
		Credential: cred.Marshal(),
		Fixtures:   s.w.fixturesDir(),
		Env:        o.env,
		Args:       args,
	})
	if err != nil {
		return nil, err
	}
	s.drivers = append(s.drivers, d)
	return d, nil
}

// runDriver runs one command to its end and keeps what it printed.
func (s *scenario) runDriver(ctx context.Context, implementation, module, node string, o driverRunOptions, args ...string) error {
	d, err := s.startDriver(ctx, implementation, module, node, o, args...)
	if err != nil {
		return err
	}
	exit, lines, err := d.Wait(ctx, driverRun)
	if err != nil {
		return err
	}
	if exit != 0 {
		logs, _ := d.Logs(ctx)
		return fmt.Errorf("driver of %s exited %d on %v:\n%s", implementation, exit, args, logs)
	}
	s.lines = lines
	return nil
}

// line returns the first line of kind the last command printed.
func (s *scenario) line(kind string) (harness.DriverLine, error) {
	for _, l := range s.lines {
		if l.Kind() == kind {
			return l, nil
		}
	}
	return nil, fmt.Errorf("expected the driver to print a %q line, it printed %v", kind, s.lines)
}

// done is the last command's closing line.
func (s *scenario) done() (harness.DriverLine, error) { return s.line("done") }

// stopDrivers ends what the scenario left running.
func (s *scenario) stopDrivers(ctx context.Context) {
	for _, d := range s.drivers {
		_ = d.Stop(ctx)
	}
	s.drivers = nil
}
