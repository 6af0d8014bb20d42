package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// The host's state directory: the sealing key it enrolled with, the
// credential it was given, and what it has applied. Every file is 0600
// and replaced atomically (atomicfile): a host killed mid-write finds the
// old file or the new one.
const (
	sealingKeyFile = "sealing-key.json"
	credentialFile = "credential.json"
	appliedFile    = "applied.json"
)

// State is a host's state directory.
type State struct{ Dir string }

func (s State) path(name string) string { return filepath.Join(s.Dir, name) }

// ErrNoState is wrapped when the directory holds nothing of the kind yet.
var ErrNoState = errors.New("not in the host's state")

// open makes the directory (0700) and removes what writes a kill
// interrupted left (each may hold a secret).
func (s State) open() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	// Modules' configurations were kept here before each module had a
	// directory of its own; what is declared is written there again.
	if err := os.RemoveAll(s.path("configs")); err != nil {
		return fmt.Errorf("host state: remove the configurations of an older layout: %w", err)
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), atomicfile.TempInfix) {
			if err := os.Remove(s.path(e.Name())); err != nil {
				return fmt.Errorf("host state: remove the leftover of an interrupted write: %w", err)
			}
		}
	}
	return nil
}

func (s State) write(name string, data []byte) error {
	_, err := atomicfile.Write(s.path(name), data, 0o600, atomicfile.SyncDir)
	return err
}

func (s State) read(name string) ([]byte, error) {
	data, err := os.ReadFile(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoState, name)
	}
	return data, err
}

// SealingKey is the key the host enrols with, made and kept on first use:
// a host killed between enrolling and keeping its credential asks again
// with the same key, which the controller answers with the same
// credential (controller.Enrol).
func (s State) SealingKey() (seal.Key, error) {
	data, err := s.read(sealingKeyFile)
	if errors.Is(err, ErrNoState) {
		k, err := seal.NewKey()
		if err != nil {
			return seal.Key{}, err
		}
		return k, s.write(sealingKeyFile, k.Marshal())
	}
	if err != nil {
		return seal.Key{}, err
	}
	k, err := seal.ParseKey(data)
	if err != nil {
		return seal.Key{}, fmt.Errorf("host state: %s: %w", sealingKeyFile, err)
	}
	return k, nil
}

// Credential is the host's own credential, once enrolled; ErrNoState
// before.
func (s State) Credential() (wire.Credential, error) {
	data, err := s.read(credentialFile)
	if err != nil {
		return wire.Credential{}, err
	}
	c, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("host state: %s: %w", credentialFile, err)
	}
	return c, nil
}

// PutCredential keeps the host's credential.
func (s State) PutCredential(c wire.Credential) error { return s.write(credentialFile, c.Marshal()) }
