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

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// putModuleConfig keeps the configuration declared to module for its
// process (wire.EnvConfig), as id's to read (the host's alone when nil),
// and returns its path; with none declared it removes one kept before
// and returns "".
func (s State) putModuleConfig(module string, config []byte, id *Identity) (string, error) {
	if config == nil {
		return "", s.forget(module, configName)
	}
	if err := s.keepForModule(module, configName, config, id); err != nil {
		return "", err
	}
	return s.moduleConfig(module), nil
}

// fetchCredentials asks the controller for the credentials of the modules
// declared to the node, opens each with the node's key, keeps each for
// its module alone (identity, when the host runs modules; nil, when it
// runs none), and removes those of modules no longer declared. Every
// module's is checked to be that module's on this node before anything
// is kept.
func fetchCredentials(ctx context.Context, bus plane.CredentialAsker, s State, key seal.Key, d wire.Declaration, identity func(module string) (*Identity, error)) error {
	answer, err := bus.Credentials(ctx, d.Node)
	if err != nil {
		return fmt.Errorf("ask for the modules' credentials: %w", err)
	}
	var a wire.CredentialsAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
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
	for mod, doc := range docs {
		id, err := identity(mod)
		if err != nil {
			return err
		}
		if err := s.keepForModule(mod, credentialName, doc, id); err != nil {
			return err
		}
	}
	return s.forgetUndeclared(d.Modules)
}

// forgetUndeclared removes the secrets kept for modules not in declared
// (their credentials and configurations) and whatever else stands in the
// modules' directory that is not a module's (a file of an older layout,
// a write a kill interrupted). A module's home and its installed program
// stay: it keeps its identity, and what it left is still its own if it
// is declared again.
func (s State) forgetUndeclared(declared []string) error {
	dir := filepath.Join(s.Dir, modulesDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch {
		case !e.IsDir():
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		case !slices.Contains(declared, e.Name()):
			if err := errors.Join(s.forget(e.Name(), credentialName), s.forget(e.Name(), configName)); err != nil {
				return err
			}
		}
	}
	return nil
}
