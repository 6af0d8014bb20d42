package rollout

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
)

// newDeclarationKey mints the key the controller signs every declaration
// with (wire.SignDeclaration).
func newDeclarationKey() (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mint declaration key: %w", err)
	}
	return key, nil
}
