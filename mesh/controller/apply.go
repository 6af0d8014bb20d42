package controller

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/pki"
)

// ErrNotReloadable refuses a change apply cannot make live: nats-server
// rejects a whole reload that touches its listeners, name or store
// (NATS-NOTES "Reload"), and a bus name the certificate does not carry
// would fail every client's name check.
var ErrNotReloadable = errors.New("change cannot be applied to a running bus")

// ApplyResult says what apply changed.
type ApplyResult struct {
	// Added are the users minted by this apply.
	Added []string `json:"added"`
	// Removed are the users revoked by this apply.
	Removed []string `json:"removed"`
	// ConfigChanged is true when nats.conf was rewritten.
	ConfigChanged bool `json:"config_changed"`
	// CredentialsWritten are the users whose credential file was written.
	CredentialsWritten []string `json:"credentials_written"`
}

// Apply recomposes a state directory after the description changed: the
// secrets of principals that still exist are kept, new principals are
// minted, removed ones are dropped with their credential files (every
// credential file of a user not composed, whatever the old secrets say),
// and nats.conf is replaced atomically, only if its content changed, so
// the nats container's watcher reloads exactly once per real change.
//
// The writes are ordered so that an interrupted apply is finished by
// running it again: secrets first, then credentials, nats.conf last (the
// one that makes the change live).
func Apply(m *meshdesc.Mesh, dir string, o Options) (ApplyResult, error) {
	o = o.withDefaults()
	l := Layout{dir}
	old, err := LoadSecrets(dir)
	if err != nil {
		return ApplyResult{}, err
	}
	certPEM, err := os.ReadFile(l.ServerCert())
	if err != nil {
		return ApplyResult{}, fmt.Errorf("%w: %v", ErrNoGenesis, err)
	}
	if err := checkCertNames(certPEM, m.Bus.Names); err != nil {
		return ApplyResult{}, err
	}
	fp, err := pki.Fingerprint(certPEM)
	if err != nil {
		return ApplyResult{}, err
	}

	declKey, minted, err := ensureDeclarationKey(dir)
	if err != nil {
		return ApplyResult{}, err
	}
	if minted {
		o.Logger.Info("declaration key minted", "path", l.DeclarationKey())
	}

	res := ApplyResult{Added: []string{}, Removed: []string{}, CredentialsWritten: []string{}}
	principals := compose.Principals(m)
	secrets := Secrets{}
	for _, p := range principals {
		if sec, ok := old[p.User]; ok {
			secrets[p.User] = sec
			continue
		}
		sec, err := mintSecret(o.BcryptCost)
		if err != nil {
			return ApplyResult{}, err
		}
		secrets[p.User] = sec
		res.Added = append(res.Added, p.User)
	}
	// Removals are derived from what is on disk as well as from the old
	// secrets: an apply interrupted after it wrote the secrets has already
	// forgotten a revoked user's secret, but not yet removed its
	// credential file.
	onDisk, stale, err := credentialFiles(l)
	if err != nil {
		return ApplyResult{}, err
	}
	for _, u := range slices.Sorted(maps.Keys(old)) {
		if _, ok := secrets[u]; !ok {
			res.Removed = append(res.Removed, u)
		}
	}
	for _, u := range onDisk {
		if _, ok := secrets[u]; !ok && !slices.Contains(res.Removed, u) {
			res.Removed = append(res.Removed, u)
		}
	}
	slices.Sort(res.Removed)
	conf, err := composeConfig(m, secrets, o)
	if err != nil {
		return ApplyResult{}, err
	}
	if err := checkReloadable(l.NATSConfig(), conf); err != nil {
		return ApplyResult{}, err
	}
	docs := map[string][]byte{}
	for _, p := range principals {
		if docs[p.User], err = credentialDoc(m, p, secrets[p.User], fp, declKey); err != nil {
			return ApplyResult{}, err
		}
	}

	// Everything is composed and checked; only now is anything written.
	if _, err := writeAtomicSync(l.Secrets(), secrets.marshal(), 0o600, o.syncDir); err != nil {
		return res, err
	}
	for _, p := range principals {
		changed, err := writeAtomicSync(l.Credential(p.User), docs[p.User], 0o600, o.syncDir)
		if err != nil {
			return res, err
		}
		if changed {
			res.CredentialsWritten = append(res.CredentialsWritten, p.User)
		}
	}
	for _, u := range res.Removed {
		if err := os.Remove(l.Credential(u)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("revoke %s: %w", u, err)
		}
	}
	// A write interrupted before its rename leaves its temporary file,
	// a credential and so a password, behind.
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("remove the leftover of an interrupted write: %w", err)
		}
		o.Logger.Info("leftover of an interrupted write removed", "file", filepath.Base(p))
	}
	if len(res.Removed)+len(stale) > 0 {
		if err := o.syncDir(filepath.Join(l.Dir, CredentialsDir)); err != nil {
			return res, fmt.Errorf("revoke: %w", err)
		}
	}
	if res.ConfigChanged, err = writeAtomicSync(l.NATSConfig(), conf, 0o644, o.syncDir); err != nil {
		return res, err
	}
	for _, u := range res.Added {
		o.Logger.Info("user added", "user", u)
	}
	for _, u := range res.Removed {
		o.Logger.Info("user removed", "user", u)
	}
	o.Logger.Info("applied", "dir", dir, "added", len(res.Added), "removed", len(res.Removed), "config_changed", res.ConfigChanged)
	return res, nil
}

// credentialFiles lists the users that have a credential file in the
// state directory, and the temporary files interrupted writes left there.
func credentialFiles(l Layout) (users, stale []string, err error) {
	dir := filepath.Join(l.Dir, CredentialsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list credentials: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case !e.Type().IsRegular():
		case strings.HasPrefix(name, ".") && strings.Contains(name, tempInfix):
			stale = append(stale, filepath.Join(dir, name))
		case strings.HasSuffix(name, credentialExt) && !strings.HasPrefix(name, "."):
			users = append(users, strings.TrimSuffix(name, credentialExt))
		}
	}
	return users, stale, nil
}

// checkCertNames refuses bus names the server certificate does not carry:
// apply does not re-issue the certificate (that would change the pinned
// fingerprint of every credential in the mesh).
func checkCertNames(certPEM []byte, names []string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("read server certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("read server certificate: %w", err)
	}
	for i, n := range names {
		if err := cert.VerifyHostname(n); err != nil {
			return fmt.Errorf("%w: bus.names[%d] %q is not in the server certificate (apply does not re-issue it)", ErrNotReloadable, i, n)
		}
	}
	return nil
}

// checkReloadable compares everything but the accounts (users and
// permissions, which reload) and TLS (which reloads for new handshakes)
// between the running configuration and the new one.
func checkReloadable(path string, conf []byte) error {
	oldData, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var was, now map[string]any
	if json.Unmarshal(oldData, &was) != nil {
		// Not ours (edited by hand in the server's own syntax): nothing to
		// compare against; the composed file replaces it.
		return nil
	}
	if err := json.Unmarshal(conf, &now); err != nil {
		return fmt.Errorf("read composed configuration: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if k == "accounts" || k == "tls" {
			continue
		}
		if !reflect.DeepEqual(was[k], now[k]) {
			return fmt.Errorf("%w: %s would change from %v to %v (nats-server cannot reload it; compose it once, at genesis)",
				ErrNotReloadable, k, was[k], now[k])
		}
	}
	return nil
}
