package controller

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/mesh/compose"
)

// The state directory's layout (the brief's CLI contract). The nats/
// directory is what the nats container mounts at /etc/nats, written by the
// controller whichever store it keeps; the rest is the file store's
// (FileStore).
const (
	TLSDir              = "tls"
	CACertFile          = "ca-cert.pem"
	CAKeyFile           = "ca-key.pem"
	DeclarationKeyFile  = "declaration-key.pem"
	SecretsFile         = "secrets.json"
	StatusFile          = "status.json"
	RegistryFile        = "registry.json"
	NATSDir             = "nats"
	CredentialsDir      = "credentials"
	AMQPDir             = "amqp"
	AMQPCertFile        = "cert.pem"
	AMQPKeyFile         = "key.pem"
	AMQPDefinitionsFile = "definitions.json"
	LockFile            = ".lock"
)

// Layout names the files of a state directory: the one place they are
// spelled.
type Layout struct{ Dir string }

// NATS is the directory the nats container reads its files from.
func (l Layout) NATS() string { return filepath.Join(l.Dir, NATSDir) }

// TLS is the directory of the authority and the declaration key.
func (l Layout) TLS() string { return filepath.Join(l.Dir, TLSDir) }

// Credentials is the directory of the credential documents.
func (l Layout) Credentials() string { return filepath.Join(l.Dir, CredentialsDir) }

// Secrets is the secrets file.
func (l Layout) Secrets() string { return filepath.Join(l.Dir, SecretsFile) }

// Status is the controller's status.
func (l Layout) Status() string { return filepath.Join(l.Dir, StatusFile) }

// Registry is the file store's registry: tokens, nodes and the ledger.
func (l Layout) Registry() string { return filepath.Join(l.Dir, RegistryFile) }

// Lock is the file the file store's updates lock against each other.
func (l Layout) Lock() string { return filepath.Join(l.Dir, LockFile) }

// NATSConfig is the composed server configuration.
func (l Layout) NATSConfig() string { return filepath.Join(l.NATS(), compose.ConfigFile) }

// ServerCert is the server's certificate.
func (l Layout) ServerCert() string { return filepath.Join(l.NATS(), compose.CertFile) }

// ServerKey is the server's private key.
func (l Layout) ServerKey() string { return filepath.Join(l.NATS(), compose.KeyFile) }

// CACert is the authority's certificate.
func (l Layout) CACert() string { return filepath.Join(l.TLS(), CACertFile) }

// CAKey is the authority's private key.
func (l Layout) CAKey() string { return filepath.Join(l.TLS(), CAKeyFile) }

// DeclarationKey is the controller's declaration signing key.
func (l Layout) DeclarationKey() string { return filepath.Join(l.TLS(), DeclarationKeyFile) }

// Credential is the credential document of a user.
func (l Layout) Credential(user string) string {
	return filepath.Join(l.Credentials(), user+credentialExt)
}

// AMQP is the directory of the AMQP bus the controller minted (WriteAMQP):
// what its broker reads, and its principals' credentials.
func (l Layout) AMQP() string { return filepath.Join(l.Dir, AMQPDir) }

// AMQPCert is the broker's certificate.
func (l Layout) AMQPCert() string { return filepath.Join(l.AMQP(), AMQPCertFile) }

// AMQPKey is the broker's key.
func (l Layout) AMQPKey() string { return filepath.Join(l.AMQP(), AMQPKeyFile) }

// AMQPDefinitions are the broker's definitions, as it imports them.
func (l Layout) AMQPDefinitions() string { return filepath.Join(l.AMQP(), AMQPDefinitionsFile) }

// AMQPCredential is user's credential document for the AMQP bus.
func (l Layout) AMQPCredential(user string) string {
	return filepath.Join(l.AMQP(), CredentialsDir, user+credentialExt)
}

// amqpTemp begins the names of the directories WriteAMQP builds in.
const amqpTemp = ".amqp-"

// genesisTemp begins the names of the temporary directories a genesis
// builds in before it moves them into place.
const genesisTemp = ".genesis-"

// credentialExt ends every credential file's name.
const credentialExt = ".json"

// tempInfix marks writeAtomicSync's temporary files: "."+name+tempInfix+random.
const tempInfix = ".tmp-"

// Secret is one principal's password and its bcrypt hash. The password is
// kept so that credential documents can be rewritten (a new bus address)
// without revoking anyone.
type Secret struct {
	Password string `json:"password"`
	Hash     string `json:"hash"`
}

// Secrets maps user names to their secrets.
type Secrets map[string]Secret

func (s Secrets) hashes() map[string]string {
	out := make(map[string]string, len(s))
	for u, sec := range s {
		out[u] = sec.Hash
	}
	return out
}

func (s Secrets) marshal() []byte {
	b, _ := json.MarshalIndent(s, "", "  ") // a map of strings always marshals
	return append(b, '\n')
}

// writeAtomicSync replaces path with data through a temporary file in the
// same directory and a rename, so that a reader (the nats container's
// watcher, a module reading its credential) sees the old content or the
// new one, never a torn file. It reports whether the content changed;
// unchanged content is not rewritten.
//
// The directory is fsynced after the rename, with sync (syncDir, or what a
// test sees it through): until then the rename itself may not survive a
// crash, and the old content (a revoked user's configuration, a status
// already acknowledged) would come back.
func writeAtomicSync(path string, data []byte, perm fs.FileMode, sync func(dir string) error) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+tempInfix+"*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	// fsync before the rename: after a crash the new name must not point
	// at an empty file.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := sync(filepath.Dir(path)); err != nil {
		// The new content is in place but may not survive a crash: say
		// so, and let the caller write again.
		return true, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// syncDir fsyncs a directory, so that the entries created, renamed or
// removed in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
