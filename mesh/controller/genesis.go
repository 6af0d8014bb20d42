package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
)

// GenesisResult says what genesis minted.
type GenesisResult struct {
	// Users are the principals' user names, in compose order.
	Users []string `json:"users"`
	// Fingerprint is the server certificate's, pinned by every credential.
	Fingerprint string `json:"fingerprint"`
}

// file is one file of the state directory, relative to it.
type file struct {
	path string
	data []byte
	perm fs.FileMode
}

// Genesis raises a mesh's state from nothing into dir: the authority and
// the server certificate for every bus name, a minted password per
// principal, the composed nats.conf and each principal's credential.
// Everything is built in memory first and written into a temporary
// directory inside dir, then renamed into place, secrets.json last: a
// failure leaves no partial state, and secrets.json present means a
// genesis completed. A dir that already holds one is refused with
// ErrGenesisExists.
func Genesis(m *meshdesc.Mesh, dir string, o Options) (GenesisResult, error) {
	o = o.withDefaults()
	if err := checkEmpty(dir); err != nil {
		return GenesisResult{}, err
	}
	files, res, err := genesisFiles(m, o)
	if err != nil {
		return GenesisResult{}, err
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return GenesisResult{}, fmt.Errorf("create state directory: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A directory just made is an entry of its parent's.
		if err := o.syncDir(filepath.Dir(dir)); err != nil {
			return GenesisResult{}, fmt.Errorf("create state directory: %w", err)
		}
	}
	// A genesis killed mid-way leaves its temporary directory (with
	// secrets in it) behind; nothing else uses the name.
	if stale, _ := filepath.Glob(filepath.Join(dir, ".genesis-*")); len(stale) > 0 {
		for _, p := range stale {
			if err := os.RemoveAll(p); err != nil {
				return GenesisResult{}, fmt.Errorf("remove leftovers of an interrupted genesis: %w", err)
			}
		}
	}
	tmp, err := os.MkdirTemp(dir, ".genesis-")
	if err != nil {
		return GenesisResult{}, fmt.Errorf("create state directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, d := range []struct {
		name string
		perm fs.FileMode
	}{{TLSDir, 0o700}, {CredentialsDir, 0o700}, {NATSDir, 0o755}} {
		if err := os.Mkdir(filepath.Join(tmp, d.name), d.perm); err != nil {
			return GenesisResult{}, fmt.Errorf("write genesis: %w", err)
		}
	}
	for _, f := range files {
		if err := writeSynced(filepath.Join(tmp, f.path), f.data, f.perm); err != nil {
			return GenesisResult{}, fmt.Errorf("write genesis: %w", err)
		}
	}
	// The files are fsynced; their directories' entries are made durable
	// too before anything is moved, and every move before secrets.json's,
	// so that after a crash secrets.json present still means a completed
	// genesis.
	subdirs := []string{TLSDir, NATSDir, CredentialsDir}
	for _, name := range subdirs {
		if err := o.syncDir(filepath.Join(tmp, name)); err != nil {
			return GenesisResult{}, fmt.Errorf("write genesis: %w", err)
		}
	}
	for _, name := range subdirs {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return GenesisResult{}, fmt.Errorf("move genesis into place: %w", err)
		}
	}
	if err := o.syncDir(dir); err != nil {
		return GenesisResult{}, fmt.Errorf("move genesis into place: %w", err)
	}
	// secrets.json last: it is what marks a completed genesis.
	if err := os.Rename(filepath.Join(tmp, SecretsFile), filepath.Join(dir, SecretsFile)); err != nil {
		return GenesisResult{}, fmt.Errorf("move genesis into place: %w", err)
	}
	if err := o.syncDir(dir); err != nil {
		return GenesisResult{}, fmt.Errorf("move genesis into place: %w", err)
	}
	o.Logger.Info("genesis", "dir", dir, "users", len(res.Users), "fingerprint", res.Fingerprint)
	return res, nil
}

// checkEmpty refuses a directory holding a genesis, or the leftovers of
// one, so that genesis never overwrites secrets already issued.
func checkEmpty(dir string) error {
	if _, err := os.Stat(Layout{dir}.Secrets()); err == nil {
		return fmt.Errorf("%w: %s exists; use apply to change an existing mesh", ErrGenesisExists, Layout{dir}.Secrets())
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspect state directory: %w", err)
	}
	for _, name := range []string{TLSDir, NATSDir, CredentialsDir} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s exists without %s (the leftovers of an interrupted genesis?); remove it or use another directory",
				ErrGenesisExists, p, SecretsFile)
		}
	}
	return nil
}

// genesisFiles mints everything genesis writes, in memory.
func genesisFiles(m *meshdesc.Mesh, o Options) ([]file, GenesisResult, error) {
	now := o.Now()
	ca, err := pki.NewCA(m.Name+" mesh authority", now)
	if err != nil {
		return nil, GenesisResult{}, err
	}
	certPEM, keyPEM, err := ca.IssueServer(m.Bus.Names, now)
	if err != nil {
		return nil, GenesisResult{}, err
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		return nil, GenesisResult{}, err
	}
	declKey, declPEM, err := newDeclarationKey()
	if err != nil {
		return nil, GenesisResult{}, err
	}
	principals := compose.Principals(m)
	secrets := Secrets{}
	res := GenesisResult{Fingerprint: fp}
	for _, p := range principals {
		sec, err := mintSecret(o.BcryptCost)
		if err != nil {
			return nil, GenesisResult{}, err
		}
		secrets[p.User] = sec
		res.Users = append(res.Users, p.User)
	}
	conf, err := composeConfig(m, secrets, o)
	if err != nil {
		return nil, GenesisResult{}, err
	}
	files := []file{
		{filepath.Join(TLSDir, CACertFile), ca.CertPEM, 0o644},
		{filepath.Join(TLSDir, CAKeyFile), ca.KeyPEM, 0o600},
		{filepath.Join(TLSDir, DeclarationKeyFile), declPEM, 0o600},
		{filepath.Join(NATSDir, compose.CertFile), certPEM, 0o644},
		{filepath.Join(NATSDir, compose.KeyFile), keyPEM, 0o600},
		{filepath.Join(NATSDir, compose.ConfigFile), conf, 0o644},
		{SecretsFile, secrets.marshal(), 0o600},
	}
	for _, p := range principals {
		doc, err := credentialDoc(m, p, secrets[p.User], fp, declKey)
		if err != nil {
			return nil, GenesisResult{}, err
		}
		files = append(files, file{filepath.Join(CredentialsDir, p.User+".json"), doc, 0o600})
	}
	return files, res, nil
}

// writeSynced writes a new file and fsyncs it, so that the renames that
// publish it never expose an empty file after a crash.
func writeSynced(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
