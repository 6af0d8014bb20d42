package harness

import (
	"errors"
	"fmt"

	"github.com/meshbus/mesh/harness/images"
)

// ErrInfrastructure is wrapped by every failure of the machinery rather
// than of the product: Docker unreachable, an image that would not build,
// a container Docker would not create or start. It is the images
// package's sentinel, so one errors.Is covers both packages.
var ErrInfrastructure = images.ErrInfrastructure

// ErrClosed is returned by a Session asked to create something after
// Close has begun.
var ErrClosed = errors.New("harness session closed")

// ErrUnknownRole is returned when a container role or network name is not
// one the cluster has.
var ErrUnknownRole = errors.New("unknown role")

// infra marks err as a failure of the machinery, with a short context.
func infra(context string, err error) error {
	if errors.Is(err, ErrInfrastructure) {
		return fmt.Errorf("%s: %w", context, err)
	}
	return fmt.Errorf("%s: %w: %w", context, ErrInfrastructure, err)
}
