package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshbus/mesh/mesh/atomicfile"
)

// What the host keeps for each module, in its state directory:
//
//	<state>                    0711 the host's   entered by modules, never listed
//	<state>/modules            0711 the host's
//	<state>/modules/<m>        0750 the host's, m's group: what the host keeps for m
//	  credential.json            0440 the host's, m's group
//	  config.json                0440 the host's, m's group (a declared configuration)
//	  program                    0755 the host's (m's installed artifact)
//	<state>/modules/<m>/home   0700 m's: its working directory and HOME
//
// A module reads what is kept for it and changes none of it; no other
// module may enter its directory; the host's own files (its credential,
// the sealing key, what it applied, its outbox) are 0600 in directories
// no module may list. A host that runs no module keeps its modules'
// files 0600 in 0700 directories, as the rest of its state.
const (
	modulesDir       = "modules"
	credentialName   = "credential.json"
	configName       = "config.json"
	programName      = "program"
	homeName         = "home"
	enteredNotListed = 0o711
)

func (s State) moduleDir(module string) string { return filepath.Join(s.Dir, modulesDir, module) }

// ModuleCredential is where the credential of module is kept.
func (s State) ModuleCredential(module string) string {
	return filepath.Join(s.moduleDir(module), credentialName)
}

// moduleConfig is where the configuration declared to module is kept
// (wire.EnvConfig).
func (s State) moduleConfig(module string) string {
	return filepath.Join(s.moduleDir(module), configName)
}

// ModuleProgram is where module's installed artifact is kept.
func (s State) ModuleProgram(module string) string {
	return filepath.Join(s.moduleDir(module), programName)
}

// ModuleHome is module's working directory, its own.
func (s State) ModuleHome(module string) string { return filepath.Join(s.moduleDir(module), homeName) }

// keepForModule writes name in module's directory: readable by module's
// group alone when it runs as id, the host's alone when id is nil.
func (s State) keepForModule(module, name string, data []byte, id *Identity) error {
	dir := s.moduleDir(module)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keep %s of module %s: %w", name, module, err)
	}
	path := filepath.Join(dir, name)
	perm := fs.FileMode(0o600)
	if id != nil {
		perm = 0o440
	}
	if _, err := atomicfile.Write(path, data, perm, atomicfile.SyncDir); err != nil {
		return fmt.Errorf("keep %s of module %s: %w", name, module, err)
	}
	if id != nil {
		if err := giveGroup(path, perm, *id); err != nil {
			return fmt.Errorf("keep %s of module %s: %w", name, module, err)
		}
	}
	return nil
}

// forget removes name from module's directory, if it is there.
func (s State) forget(module, name string) error {
	if err := os.Remove(filepath.Join(s.moduleDir(module), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s of module %s: %w", name, module, err)
	}
	return nil
}

// prepareModule makes module's directories as the layout above says for
// a module running as id, and gives it what is kept for it already (a
// host restarted, a state written before modules ran as their own).
// Nothing is followed: the host owns every directory on the way, and the
// home's own entries, the module's to write, are never touched.
func (s State) prepareModule(module string, id Identity) error {
	for _, dir := range []string{s.Dir, filepath.Join(s.Dir, modulesDir)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("prepare module %s: %w", module, err)
		}
		if err := os.Chmod(dir, enteredNotListed); err != nil {
			return fmt.Errorf("prepare module %s: %w", module, err)
		}
	}
	dir := s.moduleDir(module)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	if err := removeTemps(dir); err != nil {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	if err := giveGroup(dir, 0o750, id); err != nil {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	for _, name := range []string{credentialName, configName} {
		err := giveGroup(filepath.Join(dir, name), 0o440, id)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("prepare module %s: %w", module, err)
		}
	}
	home := s.ModuleHome(module)
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	if err := os.Lchown(home, int(id.UID), int(id.GID)); err != nil {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return fmt.Errorf("prepare module %s: %w", module, err)
	}
	return nil
}

// giveGroup makes path the host's, of id's group, with perm.
func giveGroup(path string, perm fs.FileMode, id Identity) error {
	if err := os.Lchown(path, os.Geteuid(), int(id.GID)); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// removeTemps removes what writes a kill interrupted left in dir (each
// may hold a secret).
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), atomicfile.TempInfix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove the leftover of an interrupted write: %w", err)
			}
		}
	}
	return nil
}

// reachable says why a process of another user cannot reach path (a
// directory on the way it may not enter), or nil: a module's program, its
// credential and its home must be within its reach, and a refusal naming
// the directory beats a module that cannot start.
func reachable(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		info, err := os.Stat(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// One not made yet is made by the host, with the modes it needs.
		if err == nil && info.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%w: %s is on the way to %s and other users may not enter it (mode %v)", ErrIsolation, dir, abs, info.Mode().Perm())
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}
