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
	"sync"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/harness/rabbitmq"
)

// Catalog is every image by name, each with how it is built, in the
// order Ensure builds them within its lane.
type Catalog struct {
	b       *images.Builder
	entries []entry
}

// A lane is a line of builds made one after the other; the two lanes run
// at once. The Go images are compiled (CPU), the Debian ones mostly
// downloaded and unpacked by mmdebstrap (network and disk): on a fresh
// machine of two cores, one waits less on the other than on itself.
const (
	laneGo = iota
	laneDebian
)

type entry struct {
	name   string
	lane   int
	ensure func(context.Context, *images.Builder) (string, error)
}

// New lists the images: the registry's drivers, and, through getenv, the
// Debian archive (images.DebianFromEnv) and the user's own broker or
// store image where one is named (used as it is, not built). The names
// are the images package's. b's settings are read at Ensure, so they may
// be set after New.
func New(b *images.Builder, reg *conformance.Registry, getenv func(string) string) *Catalog {
	d := images.DebianFromEnv(getenv)
	c := &Catalog{b: b}
	add := func(name string, lane int, ensure func(context.Context, *images.Builder) (string, error)) {
		c.entries = append(c.entries, entry{name, lane, ensure})
	}
	for _, s := range images.All() {
		add(s.Name, laneGo, func(ctx context.Context, b *images.Builder) (string, error) { return b.Ensure(ctx, s) })
	}
	// The drivers written in Go are in All(); the others are Debian's
	// Node.js with the SDK's files.
	for _, impl := range reg.Implementations {
		if impl.Node == "" {
			continue
		}
		add(images.DriverName(impl.Name), laneDebian, func(ctx context.Context, b *images.Builder) (string, error) { return b.EnsureDriver(ctx, impl, d) })
	}
	add(images.RabbitMQ(d).Name, laneDebian, func(ctx context.Context, b *images.Builder) (string, error) {
		return rabbitmq.EnsureImage(ctx, b, getenv(rabbitmq.EnvImage), d)
	})
	add(images.Postgres(d).Name, laneDebian, func(ctx context.Context, b *images.Builder) (string, error) {
		return postgres.EnsureImage(ctx, b, getenv(postgres.EnvImage), d)
	})
	netem := images.Netem(d)
	add(netem.Name, laneDebian, func(ctx context.Context, b *images.Builder) (string, error) { return b.EnsureDebian(ctx, netem) })
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
// or stale, the Go lane and the Debian lane at once, and returns the
// references of those ready, in the catalog's order. It goes on past a
// failure, as images' EnsureAll does, so that one broken image does not
// hide the state of the others, and joins the errors;
// images.ErrInfrastructure among them says the machine, not the
// checkout, is to blame. Once ctx ends, a lane starts nothing more.
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
	// The Debian lane builds with a builder of its own: a builder makes
	// one build at a time.
	builders := []*images.Builder{c.b, c.b.Sibling()}
	defer func() { _ = builders[laneDebian].Close() }()
	refs := make([]string, len(chosen))
	errs := make([]error, len(chosen))
	var wg sync.WaitGroup
	for lane, b := range builders {
		wg.Go(func() {
			for i, e := range chosen {
				if e.lane != lane {
					continue
				}
				if ctx.Err() != nil {
					errs[i] = fmt.Errorf("build %s: %w", e.name, context.Cause(ctx))
					return // the lane's other images: not started, as the error says
				}
				ref, err := e.ensure(ctx, b)
				if err != nil {
					errs[i] = fmt.Errorf("build %s: %w", e.name, err)
					continue
				}
				refs[i] = ref
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(refs, func(r string) bool { return r == "" }), errors.Join(errs...)
}
