package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// modulesDir holds the credential of each module the node runs, one file
// each (0600), which that module's process is given (ADR 0047).
const modulesDir = "modules"

// configsDir holds the configuration declared to each module that has
// one (wire.Declaration.Config), one file each (0600).
const configsDir = "configs"

// moduleConfig is where the configuration of module is kept, for its
// process to read (wire.EnvConfig).
func (s State) moduleConfig(module string) string {
	return filepath.Join(s.Dir, configsDir, module+".json")
}

// putModuleConfig keeps the configuration declared to module, 0600 like
// the rest of the state, and returns its path; with none declared it
// removes one kept before and returns "".
func (s State) putModuleConfig(module string, config []byte) (string, error) {
	path := s.moduleConfig(module)
	if config == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("remove the configuration of %s: %w", module, err)
		}
		return "", nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("keep the configuration of %s: %w", module, err)
	}
	if _, err := atomicfile.Write(path, config, 0o600, atomicfile.SyncDir); err != nil {
		return "", fmt.Errorf("keep the configuration of %s: %w", module, err)
	}
	return path, nil
}

// ModuleCredential is where the credential of module is kept.
func (s State) ModuleCredential(module string) string {
	return filepath.Join(s.Dir, modulesDir, module+".json")
}

// fetchCredentials asks the controller for the credentials of the modules
// declared to the node, opens each with the node's key, keeps them, and
// removes those of modules no longer declared. Every module's is checked
// to be that module's on this node before anything is kept.
func fetchCredentials(ctx context.Context, nc *nats.Conn, s State, key seal.Key, d wire.Declaration) error {
	msg, err := nc.RequestWithContext(ctx, wire.NodeCredentials(d.Node), nil)
	if err != nil {
		return fmt.Errorf("ask for the modules' credentials: %w", err)
	}
	var a wire.CredentialsAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return fmt.Errorf("the modules' credentials: not an answer: %w", err)
	}
	if a.Refused != "" {
		return fmt.Errorf("the modules' credentials were refused: %s", a.Refused)
	}
	docs := map[string][]byte{}
	for _, mod := range d.Modules {
		sealed, ok := a.Sealed[mod]
		if !ok {
			return fmt.Errorf("no credential for module %s", mod)
		}
		doc, err := key.Open(sealed)
		if err != nil {
			return fmt.Errorf("module %s's credential: %w", mod, err)
		}
		c, err := wire.ParseCredential(doc)
		if err != nil || c.Node != d.Node || c.Module != mod {
			return fmt.Errorf("module %s's credential is %s's (%v)", mod, c.User(), err)
		}
		docs[mod] = doc
	}
	dir := filepath.Join(s.Dir, modulesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for mod, doc := range docs {
		if _, err := atomicfile.Write(s.ModuleCredential(mod), doc, 0o600, atomicfile.SyncDir); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		mod, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !slices.Contains(d.Modules, mod) {
			// A module no longer declared, or a write a kill interrupted.
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
