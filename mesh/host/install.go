package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// installedFile is where the host keeps which artifact it installed for
// each module, so that a restart does not fetch one again.
const installedFile = "installed.json"

// Installed are the artifacts installed, by module.
type Installed map[string]string

// Installed reads what was installed; nothing before the first install.
func (s State) Installed() (Installed, error) {
	data, err := s.read(installedFile)
	if errors.Is(err, ErrNoState) {
		return Installed{}, nil
	}
	if err != nil {
		return nil, err
	}
	var in Installed
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("host state: %s: %w", installedFile, err)
	}
	return in, nil
}

func (s State) putInstalled(in Installed) error {
	b, _ := json.Marshal(in)
	return s.write(installedFile, b)
}

// ErrInstall is wrapped by every refusal to install a declared artifact:
// one whose bytes are not the digest declared, one the bus does not
// hold whole. The declaration is refused and reported with the reason.
var ErrInstall = errors.New("artifact not installed")

// install puts the program of each module d declares an artifact for in
// that module's own directory (State.ModuleProgram, never the programs
// directory the host's own names are in): fetched from the bus (on NATS,
// ARTIFACTS by direct gets the host's grant names those artifacts' chunks
// alone for), its digest and size checked, written beside it and renamed over the old one, so
// a kill halfway leaves the old program or the new one, and kept in the
// state as installed. A module whose artifact is installed already is
// left as it is.
func install(ctx context.Context, bus plane.ArtifactFetcher, s State, runsModules bool, d wire.Declaration) error {
	if len(d.Artifacts) == 0 {
		return nil
	}
	if !runsModules {
		return fmt.Errorf("%w: the declaration installs %d artifact(s) and the host runs no module (no --programs)", ErrInstall, len(d.Artifacts))
	}
	in, err := s.Installed()
	if err != nil {
		return err
	}
	for _, mod := range d.Modules {
		a, ok := d.Artifacts[mod]
		if !ok {
			continue
		}
		path := s.ModuleProgram(mod)
		if in[mod] == a.Digest && isProgram(path) {
			continue
		}
		data, err := bus.Artifact(ctx, a.Digest, a.Size)
		if errors.Is(err, artifact.ErrDigest) || errors.Is(err, artifact.ErrMissing) || errors.Is(err, artifact.ErrSize) {
			return fmt.Errorf("%w: module %s: %w", ErrInstall, mod, err)
		}
		if err != nil {
			return fmt.Errorf("install %s: %w", mod, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("install %s: %w", mod, err)
		}
		if _, err := atomicfile.Write(path, data, 0o755, atomicfile.SyncDir); err != nil {
			return fmt.Errorf("install %s: %w", mod, err)
		}
		in[mod] = a.Digest
		if err := s.putInstalled(in); err != nil {
			return err
		}
	}
	return nil
}

func isProgram(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}
