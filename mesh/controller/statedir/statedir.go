package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/mesh/compose"
)

// The state directory's layout (the brief's CLI contract). The nats/
// directory is what the nats container mounts at /etc/nats, written by the
// controller whichever store it keeps; the rest is the file store's
// (store.FileStore).
const (
	TLSDir              = "tls"
	CACertFile          = "ca-cert.pem"
	CAKeyFile           = "ca-key.pem"
	DeclarationKeyFile  = "declaration-key.pem"
	SecretsFile         = "secrets.json"
	StatusFile          = "status.json"
	RegistryFile        = "registry.json"
	RegistryJournalFile = "registry.journal"
	NATSDir             = "nats"
	CredentialsDir      = "credentials"
	AMQPDir             = "amqp"
	AMQPCertFile        = "cert.pem"
	AMQPKeyFile         = "key.pem"
	AMQPDefinitionsFile = "definitions.json"
	LockFile            = ".lock"
	ComposeLockFile     = ".compose.lock"
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

// RegistryJournal is the file store's journal of the registry's updates
// since Registry was last written whole.
func (l Layout) RegistryJournal() string { return filepath.Join(l.Dir, RegistryJournalFile) }

// Lock is the file the file store's updates lock against each other.
func (l Layout) Lock() string { return filepath.Join(l.Dir, LockFile) }

// ComposeLock is the file compositions lock against each other, whatever
// the store and whichever process composes.
func (l Layout) ComposeLock() string { return filepath.Join(l.Dir, ComposeLockFile) }

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
	return filepath.Join(l.Credentials(), user+CredentialExt)
}

// AMQP is the directory of the AMQP bus the controller minted (rollout.WriteAMQP):
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
	return filepath.Join(l.AMQP(), CredentialsDir, user+CredentialExt)
}

// AMQPTemp begins the names of the directories rollout.WriteAMQP builds in.
const AMQPTemp = ".amqp-"

// GenesisTemp begins the names of the temporary directories a genesis
// builds in before it moves them into place.
const GenesisTemp = ".genesis-"

// CredentialExt ends every credential file's name.
const CredentialExt = ".json"

// WriteSynced writes a new file and fsyncs it, so that the renames that
// publish it never expose an empty file after a crash.
func WriteSynced(path string, data []byte, perm fs.FileMode) error {
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

// MakeDir creates dir when it is missing, and makes its entry in its
// parent durable.
func MakeDir(dir string, sync func(string) error) error {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := sync(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	}
	return nil
}

// RemoveGenesisLeftovers removes the temporary directories (with secrets
// in them) of a genesis killed mid-way; nothing else uses the name.
func RemoveGenesisLeftovers(dir string) error {
	stale, _ := filepath.Glob(filepath.Join(dir, GenesisTemp+"*"))
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove leftovers of an interrupted genesis: %w", err)
		}
	}
	return nil
}
