package postgres

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/harness/images"
)

// EnvImage names an image to run instead of ours, for a user who can pull
// one (e.g. postgres:15). The harness reads it as the default of its
// image option.
const EnvImage = "MESH_POSTGRES_IMAGE"

// EnsureImage returns the image to run: ref when it is given (the user's
// choice, used as it is), else ours, mesh-postgres, built by b from the
// Debian packages of d when it is missing or its recipe changed.
func EnsureImage(ctx context.Context, b *images.Builder, ref string, d images.Debian) (string, error) {
	if ref != "" {
		return ref, nil
	}
	got, err := b.EnsureDebian(ctx, images.Postgres(d))
	if err != nil {
		return "", fmt.Errorf("ensure postgres image: %w", err)
	}
	return got, nil
}
