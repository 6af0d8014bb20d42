package controller

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DeclarationKeyFile is the controller's declaration signing key, in TLSDir.
const DeclarationKeyFile = "declaration-key.pem"

// DeclarationKey is the controller's declaration signing key.
func (l Layout) DeclarationKey() string { return filepath.Join(l.Dir, TLSDir, DeclarationKeyFile) }

const pemPrivateKey = "PRIVATE KEY"

// newDeclarationKey mints the key the controller signs every declaration
// with (wire.SignDeclaration), as PKCS #8 PEM.
func newDeclarationKey() (ed25519.PrivateKey, []byte, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("mint declaration key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("mint declaration key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

func parseDeclarationKey(data []byte, path string) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemPrivateKey {
		return nil, fmt.Errorf("read declaration key %s: no %s PEM block", path, pemPrivateKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("read declaration key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("read declaration key %s: not an ed25519 key", path)
	}
	return key, nil
}

// LoadDeclarationKey reads the state directory's declaration key.
func LoadDeclarationKey(dir string) (ed25519.PrivateKey, error) {
	path := Layout{dir}.DeclarationKey()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is missing (a state directory from before declarations were signed: run apply once to mint it)", ErrNoGenesis, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read declaration key: %w", err)
	}
	return parseDeclarationKey(data, path)
}

// ensureDeclarationKey loads the key, or mints and writes one where a
// state directory raised before declarations were signed has none.
func ensureDeclarationKey(dir string) (ed25519.PrivateKey, bool, error) {
	key, err := LoadDeclarationKey(dir)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, ErrNoGenesis) {
		return nil, false, err
	}
	key, data, err := newDeclarationKey()
	if err != nil {
		return nil, false, err
	}
	if _, err := writeAtomic(Layout{dir}.DeclarationKey(), data, 0o600); err != nil {
		return nil, false, err
	}
	return key, true, nil
}
