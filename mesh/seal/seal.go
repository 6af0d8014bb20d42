// Package seal seals what the controller hands a node to the node's own
// key (design 25 §6: credentials are sealed to the enrolling node's
// sealing key): NaCl's anonymous sealed box, curve25519 with
// xsalsa20-poly1305 (golang.org/x/crypto/nacl/box). Only the holder of
// the private key opens it; anyone may seal to the public one, and a
// sealed box says nothing of who sealed it, which is why what is sealed
// travels only on a subject the server lets nobody else publish on.
package seal

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
)

// KeySize is the size of a public and of a private key.
const KeySize = 32

// ErrOpen is wrapped when a sealed box does not open: it was sealed to
// another key, or changed on the way.
var ErrOpen = errors.New("the sealed box does not open with this key")

// Key is a sealing key pair.
type Key struct {
	Public, Private *[KeySize]byte
}

// NewKey draws a key pair from crypto/rand.
func NewKey() (Key, error) {
	pub, priv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("new sealing key: %w", err)
	}
	return Key{Public: pub, Private: priv}, nil
}

// EncodePublic spells a public key for a payload: unpadded URL-safe
// base64.
func EncodePublic(pub *[KeySize]byte) string { return base64.RawURLEncoding.EncodeToString(pub[:]) }

// ParsePublic reads a public key EncodePublic spelled.
func ParsePublic(s string) (*[KeySize]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != KeySize {
		return nil, fmt.Errorf("a sealing key is %d bytes in unpadded URL-safe base64, got %q", KeySize, s)
	}
	var k [KeySize]byte
	copy(k[:], b)
	return &k, nil
}

// To seals msg to the public key pub.
func To(pub *[KeySize]byte, msg []byte) ([]byte, error) {
	out, err := box.SealAnonymous(nil, msg, pub, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return out, nil
}

// Open opens a box sealed to k.
func (k Key) Open(sealed []byte) ([]byte, error) {
	msg, ok := box.OpenAnonymous(nil, sealed, k.Public, k.Private)
	if !ok {
		return nil, ErrOpen
	}
	return msg, nil
}

// keyDoc is how a key pair is kept in a file: both halves in
// EncodePublic's spelling.
type keyDoc struct {
	Public  string `json:"public"`
	Private string `json:"private"`
}

// Marshal renders the key pair for a file only its holder reads (0600):
// it holds the private half.
func (k Key) Marshal() []byte {
	b, _ := json.Marshal(keyDoc{Public: EncodePublic(k.Public), Private: EncodePublic(k.Private)})
	return append(b, '\n')
}

// ParseKey reads a key pair Marshal rendered, and checks that its two
// halves belong together.
func ParseKey(data []byte) (Key, error) {
	var doc keyDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return Key{}, fmt.Errorf("read sealing key: %w", err)
	}
	pub, err := ParsePublic(doc.Public)
	if err != nil {
		return Key{}, fmt.Errorf("read sealing key: the public key: %w", err)
	}
	priv, err := ParsePublic(doc.Private) // the same spelling
	if err != nil {
		return Key{}, fmt.Errorf("read sealing key: the private key: %w", err)
	}
	var derived [KeySize]byte
	curve25519.ScalarBaseMult(&derived, priv)
	if derived != *pub {
		return Key{}, errors.New("read sealing key: the public key is not the private key's")
	}
	return Key{Public: pub, Private: priv}, nil
}
