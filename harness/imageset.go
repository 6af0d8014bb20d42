package harness

import (
	"context"

	"github.com/meshbus/mesh/harness/images"
)

// imageSet holds the references of the images a genesis cluster runs.
type imageSet struct {
	nats, controller, probe string
}

// ensureImages builds whichever of the cluster's images is missing or
// stale (the images package decides, from its inputs label) and returns
// their references. A failure wraps ErrInfrastructure.
func (s *Session) ensureImages(ctx context.Context) (imageSet, error) {
	specs := []images.Spec{images.NATS(), images.Controller(), images.Probe()}
	refs, err := s.builder.EnsureAll(ctx, specs...)
	if err != nil {
		return imageSet{}, infra("ensure images", err)
	}
	return imageSet{
		nats:       refs[specs[0].Name],
		controller: refs[specs[1].Name],
		probe:      refs[specs[2].Name],
	}, nil
}
