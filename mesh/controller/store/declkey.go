package store

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

const pemPrivateKey = "PRIVATE KEY"

// encodeDeclarationKey is the key as PKCS #8 PEM, as the file store keeps
// it.
func encodeDeclarationKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode declaration key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
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
