package harness

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// maxReadFile bounds what ReadFile reads: a ledger or a state file, never
// an image's worth.
const maxReadFile = 64 << 20

// ReadFile is the file at path inside the container, as the engine copies
// it out (docker cp): whatever user owns it, bind-mounted or not, the
// container running, paused or stopped. A path that does not exist is an
// error wrapping fs.ErrNotExist.
func (c *Handle) ReadFile(ctx context.Context, path string) ([]byte, error) {
	res, err := c.docker.CopyFromContainer(ctx, c.id, client.CopyFromContainerOptions{SourcePath: path})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("read %s in %s: %w", path, c.role, fs.ErrNotExist)
	}
	if err != nil {
		return nil, infra("read "+path+" in "+c.role, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	h, err := tr.Next()
	if err != nil {
		return nil, infra("read "+path+" in "+c.role, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("read %s in %s: not a regular file", path, c.role)
	}
	data, err := io.ReadAll(io.LimitReader(tr, maxReadFile+1))
	if err != nil {
		return nil, infra("read "+path+" in "+c.role, err)
	}
	if len(data) > maxReadFile {
		return nil, fmt.Errorf("read %s in %s: %w", path, c.role, errors.New("larger than 64 MiB"))
	}
	return data, nil
}
