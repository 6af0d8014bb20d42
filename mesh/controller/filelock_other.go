//go:build !unix

package controller

import (
	"context"
	"os"
)

// lockFile locks nothing where flock is not: updates are serialised
// within the process alone.
func lockFile(context.Context, string) (*os.File, bool, error) { return nil, false, nil }
