//go:build !unix

package store

import (
	"context"
	"os"
)

// Lock locks nothing where flock is not: updates are serialised
// within the process alone.
func Lock(context.Context, string) (*os.File, bool, error) { return nil, false, nil }
