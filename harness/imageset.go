package harness

import (
	"context"

	"github.com/meshbus/mesh/harness/images"
)

// imageSet holds the references of the images a cluster runs.
type imageSet struct {
	nats, controller, probe, host string
	builder, source               string
	predecessor                   string
}

// ensureImages builds whichever of the cluster's images is missing or
// stale (the images package decides, from its inputs label) and returns
// their references; the host's only when hosts says the cluster runs one,
// the predecessor's only when predecessor does. A failure wraps
// ErrInfrastructure.
func (s *Session) ensureImages(ctx context.Context, hosts, predecessor bool) (imageSet, error) {
	specs := []images.Spec{images.NATS(), images.Controller(), images.Probe()}
	if hosts {
		specs = append(specs, images.Host(), images.BuildMachine(), images.Source())
	}
	if predecessor {
		specs = append(specs, images.Predecessor())
	}
	refs, err := s.builder.EnsureAll(ctx, specs...)
	if err != nil {
		return imageSet{}, infra("ensure images", err)
	}
	set := imageSet{
		nats:       refs[specs[0].Name],
		controller: refs[specs[1].Name],
		probe:      refs[specs[2].Name],
	}
	if hosts {
		set.host = refs[images.Host().Name]
		set.builder = refs[images.BuildMachine().Name]
		set.source = refs[images.Source().Name]
	}
	set.predecessor = refs[images.Predecessor().Name]
	return set, nil
}
