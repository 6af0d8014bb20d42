package wire

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// HeaderSignature carries the controller's signature of a declaration.
const HeaderSignature = "x-signature"

// Declaration is what the controller tells a node to be (design 25 §1),
// kept last-per-subject on NODES at NodeDeclare(Node).
type Declaration struct {
	// Node is the node it is for; it must match the subject it is on.
	Node string `json:"node"`
	// Revision counts the node's declarations: each push that changes
	// what the node is to run gives it the next one. A host refuses a
	// declaration whose revision is not above the one it applied.
	Revision uint64 `json:"revision"`
	// Modules are the modules assigned to the node, in description order.
	Modules []string `json:"modules"`
	// Versions are the modules' versions, for those the description gives
	// one.
	Versions map[string]string `json:"versions,omitempty"`
	// Config is the configuration the controller derived for a module,
	// by module, for those it derives one (the catalogue's is the
	// Catalogue): JSON the host hands the module's process in the file
	// EnvConfig names. It travels signed with the declaration; a module
	// whose configuration changes is started again.
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// Artifacts are the built artifacts the node installs, by module: it
	// fetches each from ARTIFACTS, checks its digest, and runs it as the
	// module's program.
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
	// Move asks the node to move to another bus, during a cutover.
	Move *Move `json:"move,omitempty"`
}

// Artifact names a built artifact: its digest (Digest) and its size.
type Artifact struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ErrDeclaration is wrapped by every refusal of a declaration.
var ErrDeclaration = errors.New("not a declaration of the controller's")

// Signing a declaration binds it to its subject: a host may make the
// server write onto another node's subject (the PubAck of its own report,
// an API status: docs/decisions/0001), but what the server writes there
// is never signed, and a genuine declaration copied there (a direct get's
// answer) is signed for its own node's subject, not that one.
func signedBytes(subject string, body []byte) []byte {
	return append([]byte("mesh-declaration\n"+subject+"\n"), body...)
}

// SignDeclaration renders d as its body and the signature to send in
// HeaderSignature.
func SignDeclaration(key ed25519.PrivateKey, d Declaration) (body []byte, signature string, err error) {
	if err := CheckName(d.Node); err != nil {
		return nil, "", fmt.Errorf("sign declaration: node: %w", err)
	}
	if d.Modules == nil {
		d.Modules = []string{}
	}
	if len(d.Config) > 0 {
		config := make(map[string]json.RawMessage, len(d.Config))
		for mod, doc := range d.Config {
			// One spelling whatever the store kept (PostgreSQL's jsonb
			// orders keys and spaces them): signed again after a restart,
			// it is the same bytes, and the guard has nothing to put back.
			if config[mod], err = canonicalJSON(doc); err != nil {
				return nil, "", fmt.Errorf("sign declaration: the configuration of %s: %w", mod, err)
			}
		}
		d.Config = config
	}
	body, err = json.Marshal(d)
	if err != nil {
		return nil, "", fmt.Errorf("sign declaration: %w", err)
	}
	sig := ed25519.Sign(key, signedBytes(NodeDeclare(d.Node), body))
	return body, base64.StdEncoding.EncodeToString(sig), nil
}

// SameDeclaration says whether a and b declare the same thing to the same
// node at the same revision, configurations compared by what they say
// rather than how they are spelled: the one a host applied, published
// again by the controller, is no new declaration and no refusal.
func SameDeclaration(a, b Declaration) bool {
	if a.Node != b.Node || a.Revision != b.Revision || !slices.Equal(a.Modules, b.Modules) ||
		!maps.Equal(a.Versions, b.Versions) || !maps.Equal(a.Artifacts, b.Artifacts) || len(a.Config) != len(b.Config) ||
		!sameMove(a.Move, b.Move) {
		return false
	}
	for mod, x := range a.Config {
		y, ok := b.Config[mod]
		if !ok {
			return false
		}
		cx, errx := canonicalJSON(x)
		cy, erry := canonicalJSON(y)
		if errx != nil || erry != nil || !bytes.Equal(cx, cy) {
			return false
		}
	}
	return true
}

func sameMove(a, b *Move) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// VerifyDeclaration is how every reader of NODES takes a message: only a
// body the controller signed for exactly this subject is a declaration.
// Anything else found there — a PubAck, a JetStream status, bytes some
// responder was made to write, a declaration signed for another node —
// is refused, whatever it looks like.
func VerifyDeclaration(pub ed25519.PublicKey, subject string, body []byte, signature string) (Declaration, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Declaration{}, fmt.Errorf("%w: no controller key to check it with", ErrDeclaration)
	}
	if signature == "" {
		return Declaration{}, fmt.Errorf("%w: no %s header", ErrDeclaration, HeaderSignature)
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Declaration{}, fmt.Errorf("%w: %s is not a signature", ErrDeclaration, HeaderSignature)
	}
	if !ed25519.Verify(pub, signedBytes(subject, body), sig) {
		return Declaration{}, fmt.Errorf("%w: the signature does not verify for %s", ErrDeclaration, subject)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var d Declaration
	if err := dec.Decode(&d); err != nil {
		return Declaration{}, fmt.Errorf("%w: body: %v", ErrDeclaration, err)
	}
	if NodeDeclare(d.Node) != subject {
		return Declaration{}, fmt.Errorf("%w: it is for node %q, on %s", ErrDeclaration, d.Node, subject)
	}
	return d, nil
}

// EncodeDeclarationKey renders the controller's public key as a host's
// credential carries it.
func EncodeDeclarationKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// DecodeDeclarationKey reads a key EncodeDeclarationKey rendered.
func DecodeDeclarationKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: declaration key: want %d bytes in base64", ErrBadCredential, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
