// Package imagecatalog names every image the beds use and builds them:
// the Go programs' scratch images (harness/images' All), the conformance
// drivers not written in Go, the broker, the controller's store and the
// link faults' helper, which are made of Debian's packages. `bedrun
// images` and `make images` (cmd/build-images) both build from it, so
// that warming a machine builds what a bed would otherwise build in its
// first scenario.
package imagecatalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/harness/rabbitmq"
)

// Catalog is every image by name, each with how it is built, in the
// order Ensure builds them.
type Catalog struct {
	entries []entry
}

type entry struct {
	name   string
	ensure func(context.Context) (string, error)
}

// New lists the images: the registry's drivers, and, through getenv, the
// Debian archive (images.DebianFromEnv) and the user's own broker or
// store image where one is named (used as it is, not built). The names
// are the images package's.
func New(b *images.Builder, reg *conformance.Registry, getenv func(string) string) *Catalog {
	d := images.DebianFromEnv(getenv)
	c := &Catalog{}
	add := func(name string, ensure func(context.Context) (string, error)) {
		c.entries = append(c.entries, entry{name, ensure})
	}
	for _, s := range images.All() {
		add(s.Name, func(ctx context.Context) (string, error) { return b.Ensure(ctx, s) })
	}
	// The drivers written in Go are in All(); the others are Debian's
	// Node.js with the SDK's files.
	for _, impl := range reg.Implementations {
		if impl.Node == "" {
			continue
		}
		add(images.DriverName(impl.Name), func(ctx context.Context) (string, error) { return b.EnsureDriver(ctx, impl, d) })
	}
	add(images.RabbitMQ(d).Name, func(ctx context.Context) (string, error) {
		return rabbitmq.EnsureImage(ctx, b, getenv(rabbitmq.EnvImage), d)
	})
	add(images.Postgres(d).Name, func(ctx context.Context) (string, error) {
		return postgres.EnsureImage(ctx, b, getenv(postgres.EnvImage), d)
	})
	netem := images.Netem(d)
	add(netem.Name, func(ctx context.Context) (string, error) { return b.EnsureDebian(ctx, netem) })
	return c
}

// Names are the images in the order Ensure builds them: the scratch
// images first (quick, and what most beds need), the Debian ones last.
func (c *Catalog) Names() []string {
	names := make([]string, len(c.entries))
	for i, e := range c.entries {
		names[i] = e.name
	}
	return names
}

// ErrUnknown is the error of Ensure given a name the catalog lacks.
var ErrUnknown = errors.New("unknown image")

// Ensure builds the named images (all when none is named) where missing
// or stale, and returns the references of those ready, in order. It goes
// on past a failure, as images' EnsureAll does, so that one broken image
// does not hide the state of the others, and joins the errors;
// images.ErrInfrastructure among them says the machine, not the
// checkout, is to blame.
func (c *Catalog) Ensure(ctx context.Context, names ...string) ([]string, error) {
	chosen := c.entries
	if len(names) > 0 {
		chosen = nil
		for _, n := range names {
			i := slices.IndexFunc(c.entries, func(e entry) bool { return e.name == n })
			if i < 0 {
				return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, n, strings.Join(c.Names(), ", "))
			}
			chosen = append(chosen, c.entries[i])
		}
	}
	refs := make([]string, 0, len(chosen))
	var errs []error
	for _, e := range chosen {
		ref, err := e.ensure(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("build %s: %w", e.name, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		refs = append(refs, ref)
	}
	return refs, errors.Join(errs...)
}
