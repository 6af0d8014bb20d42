package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/mesh/wire"
)

// Where a conformance driver finds what the bed gives it
// (docs/conformance.md).
const (
	DriverCredential = "/run/mesh/credential.json"
	DriverFixtures   = "/fixtures"
)

// DriverOptions says how to run one command of a conformance driver.
type DriverOptions struct {
	// Image is the driver's image (EnsureImage builds it).
	Image string
	// Credential is the credential document the driver connects with.
	Credential []byte
	// Fixtures is the host directory mounted read-only at DriverFixtures.
	Fixtures string
	// Env is set in the driver's environment besides MESH_CREDENTIAL.
	Env map[string]string
	// Args are the command line: a driver's is a driverproto.Command's
	// Argv.
	Args []string
	// Role names the container's role; default "driver".
	Role string
}

func (o DriverOptions) role() string {
	if o.Role == "" {
		return "driver"
	}
	return o.Role
}

// Driver is one running command of a conformance driver.
type Driver struct {
	c *Handle
}

// EnsureImage builds spec's image if it is missing or stale.
func (c *Cluster) EnsureImage(ctx context.Context, spec images.Spec) (string, error) {
	ref, err := c.s.builder.Ensure(ctx, spec)
	if err != nil {
		return "", infra("ensure image "+spec.Name, err)
	}
	return ref, nil
}

// ModuleImage builds the image of the sample module name (mesh/modules/
// <name>) from the checkout, when it is missing or stale, and returns its
// reference.
func (c *Cluster) ModuleImage(ctx context.Context, name string) (string, error) {
	return c.EnsureImage(ctx, images.Module(name))
}

// DriverImage builds the conformance driver of impl by its recipe in
// conformance/registry.yaml, a Go package or a Node.js program, when it is
// missing or stale, and returns its reference.
func (c *Cluster) DriverImage(ctx context.Context, impl conformance.Implementation) (string, error) {
	ref, err := c.s.builder.EnsureDriver(ctx, impl, images.DebianFromEnv(os.Getenv))
	if err != nil {
		return "", infra("ensure the driver image of "+impl.Name, err)
	}
	return ref, nil
}

// StartDriver starts one command of a driver on the private network and
// returns at once; Lines and Wait read what it printed. It runs any
// program that is given a credential the same way: a sample module too
// (Role "module", no Fixtures).
func (c *Cluster) StartDriver(ctx context.Context, o DriverOptions) (Program, error) {
	dir, err := os.MkdirTemp(c.s.work, "driver-")
	if err != nil {
		return nil, fmt.Errorf("start driver: %w", err)
	}
	cred := filepath.Join(dir, "credential.json")
	if err := os.WriteFile(cred, o.Credential, 0o644); err != nil {
		return nil, fmt.Errorf("start driver: %w", err)
	}
	env := map[string]string{wire.EnvCredential: DriverCredential}
	for k, v := range o.Env {
		env[k] = v
	}
	binds := []string{cred + ":" + DriverCredential + ":ro"}
	if o.Fixtures != "" {
		fixtures, err := filepath.Abs(o.Fixtures)
		if err != nil {
			return nil, fmt.Errorf("start driver: %w", err)
		}
		binds = append(binds, fixtures+":"+DriverFixtures+":ro")
	}
	role := c.s.roleName(o.role())
	opts := append(c.s.common(role),
		testcontainers.WithCmd(o.Args...),
		testcontainers.WithEnv(env),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.Binds = append(hc.Binds, binds...)
		}),
		network.WithNetworkName(nil, c.networks[Private]),
		// Started, not awaited: the bed acts while the command runs.
		testcontainers.WithWaitStrategy(wait.ForNop(func(context.Context, wait.StrategyTarget) error { return nil })),
	)
	ctr, runErr := testcontainers.Run(ctx, o.Image, opts...)
	var got started
	if ctr != nil {
		got = ctr
	}
	h, err := c.s.adopt(ctx, role, "", 0, got, runErr)
	if err != nil {
		return nil, err
	}
	return &Driver{c: h}, nil
}

// Lines is what the driver has printed on its standard output so far,
// read as the protocol's lines; a line the protocol does not say is an
// error (driverproto.ErrProtocol).
func (d *Driver) Lines(ctx context.Context) ([]driverproto.Line, error) {
	out, err := d.c.stdout(ctx)
	if err != nil {
		return nil, err
	}
	lines, err := driverproto.ParseOutput(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.c.role, err)
	}
	return lines, nil
}

// WaitFor polls the driver's output until it prints a line of kind, and
// returns it; it fails if the driver ends first.
func (d *Driver) WaitFor(ctx context.Context, kind driverproto.Kind, within time.Duration) (driverproto.Line, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		lines, err := d.Lines(ctx)
		if err != nil {
			return driverproto.Line{}, err
		}
		for _, l := range lines {
			if l.Kind() == kind {
				return l, nil
			}
		}
		st, err := d.c.Inspect(ctx)
		if err != nil {
			return driverproto.Line{}, err
		}
		if !st.Running && !st.StartedAt.IsZero() {
			logs, _ := d.c.Logs(ctx)
			return driverproto.Line{}, fmt.Errorf("driver ended (exit %d) without printing %q:\n%s", st.ExitCode, kind, tail(logs, tailLines))
		}
		select {
		case <-ctx.Done():
			return driverproto.Line{}, fmt.Errorf("driver printed no %q within %s", kind, within)
		case <-tick.C:
		}
	}
}

// Wait waits for the command to end and returns its exit status
// (driverproto.Exit*) and everything it printed.
func (d *Driver) Wait(ctx context.Context, within time.Duration) (int, []driverproto.Line, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := d.c.Inspect(ctx)
		if err != nil {
			return -1, nil, err
		}
		if !st.Running && !st.StartedAt.IsZero() {
			lines, err := d.Lines(ctx)
			return st.ExitCode, lines, err
		}
		select {
		case <-ctx.Done():
			return -1, nil, fmt.Errorf("driver still running after %s", within)
		case <-tick.C:
		}
	}
}

// Logs is everything the driver wrote, standard error included.
func (d *Driver) Logs(ctx context.Context) (string, error) { return d.c.Logs(ctx) }

// Stop ends the command if it is still running: a consumer left running
// would compete with the next scenario's for the same durable consumer.
func (d *Driver) Stop(ctx context.Context) error {
	st, err := d.c.Inspect(ctx)
	if err != nil || !st.Running {
		return err
	}
	return d.c.Stop(ctx)
}

// WaitLog polls everything the program wrote until text appears, and
// fails if it ends first.
func (d *Driver) WaitLog(ctx context.Context, text string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		logs, err := d.c.Logs(ctx)
		if err != nil {
			return err
		}
		if strings.Contains(logs, text) {
			return nil
		}
		st, err := d.c.Inspect(ctx)
		if err != nil {
			return err
		}
		if !st.Running && !st.StartedAt.IsZero() {
			return fmt.Errorf("%s ended (exit %d) without writing %q:\n%s", d.c.role, st.ExitCode, text, tail(logs, tailLines))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s wrote no %q within %s:\n%s", d.c.role, text, within, tail(logs, tailLines))
		case <-tick.C:
		}
	}
}

// Image is the id of the image the program runs.
func (d *Driver) Image(ctx context.Context) (string, error) {
	st, err := d.c.Inspect(ctx)
	return st.Image, err
}

// Running reports whether the program is still running.
func (d *Driver) Running(ctx context.Context) (bool, error) {
	st, err := d.c.Inspect(ctx)
	return st.Running, err
}
