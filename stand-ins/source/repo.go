package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/wire"
)

// repository is a directory of revisions: the revision r of module m is
// the file <dir>/<m>/<r>, whose bytes are its content. Module names and
// revisions are checked (wire.CheckName, wire.CheckRevision) before they
// become paths, so none can name anything outside the directory.
type repository struct{ dir string }

// errNoRevision: the repository does not have the revision asked for.
var errNoRevision = errors.New("no such revision")

// checkRevision refuses a module name or a revision the wire would.
func checkRevision(module, revision string) error {
	if err := wire.CheckName(module); err != nil {
		return fmt.Errorf("module: %w", err)
	}
	if err := wire.CheckRevision(revision); err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	return nil
}

func (r repository) path(module, revision string) string {
	return filepath.Join(r.dir, module, revision)
}

// read is the content of revision of module.
func (r repository) read(module, revision string) ([]byte, error) {
	if err := checkRevision(module, revision); err != nil {
		return nil, err
	}
	path := r.path(module, revision)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s/%s", errNoRevision, module, revision)
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s/%s is not a file", module, revision)
	}
	if fi.Size() > wire.MaxSourceContent {
		return nil, fmt.Errorf("%s/%s is %d bytes, more than a revision may carry (%d)", module, revision, fi.Size(), wire.MaxSourceContent)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s/%s is empty, and an empty revision cannot be carried (wire.FetchAnswer)", module, revision)
	}
	return data, nil
}

// write records revision of module with content, atomically: a fetch sees
// the revision whole or not at all. A revision is immutable: writing it
// again with the same content changes nothing, with other content is
// refused.
func (r repository) write(module, revision string, content []byte) error {
	if err := checkRevision(module, revision); err != nil {
		return err
	}
	if len(content) == 0 {
		return errors.New("content is empty, and an empty revision cannot be carried (wire.FetchAnswer)")
	}
	if len(content) > wire.MaxSourceContent {
		return fmt.Errorf("content is %d bytes, more than a revision may carry (%d)", len(content), wire.MaxSourceContent)
	}
	path := r.path(module, revision)
	if old, err := os.ReadFile(path); err == nil {
		if bytes.Equal(old, content) {
			return nil
		}
		return fmt.Errorf("revision %s of %s is already in the repository with other content; a revision is never rewritten", revision, module)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	_, err := atomicfile.Write(path, content, 0o644, atomicfile.SyncDir)
	return err
}
