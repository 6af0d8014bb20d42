package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-multierror"

	"github.com/meshbus/mesh/harness/owner"
)

// reap removes the containers and networks of runs whose process is gone,
// and the temporary work directories they made, except runs kept aside.
// What it could not remove is in the error.
func (s *Session) reap(ctx context.Context) error {
	removed, err := owner.Reap(ctx, s.docker, kept)
	var result *multierror.Error
	if err != nil {
		result = multierror.Append(result, err)
	}
	for _, run := range removed {
		if err := removeTempWork(run); err != nil {
			result = multierror.Append(result, err)
		}
		s.narrate("removed the leftovers of dead run %s", run)
	}
	if err := result.ErrorOrNil(); err != nil {
		return infra("reap dead runs", err)
	}
	return nil
}

// removeTempWork removes the temporary work directories a dead run made
// for itself (NewSession without a WorkDir): its state, JetStream store
// and descriptions. A WorkDir given by a caller is the caller's to keep.
func removeTempWork(run string) error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "mesh-"+run+"-*"))
	if err != nil {
		return fmt.Errorf("find work dirs of run %s: %w", run, err)
	}
	var result *multierror.Error
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			result = multierror.Append(result, fmt.Errorf("remove work dir of run %s: %w", run, err))
		}
	}
	return result.ErrorOrNil()
}
