package host

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// Applied is what the host last applied: the declaration. A declaration
// is taken only when its signed revision is above this one's: the
// revision is the order on every bus, and what the bus says of where it
// keeps a declaration (NODES's sequence on NATS) orders nothing. A state
// written before (its "seq", NODES's sequence) is read as it is, the
// sequence ignored.
type Applied struct {
	Declaration wire.Declaration `json:"declaration"`
}

// Applied is what the host last applied; zero before its first.
func (s State) Applied() (Applied, error) {
	data, err := s.read(appliedFile)
	if errors.Is(err, ErrNoState) {
		return Applied{}, nil
	}
	if err != nil {
		return Applied{}, err
	}
	var a Applied
	if err := json.Unmarshal(data, &a); err != nil {
		return Applied{}, fmt.Errorf("host state: %s: %w", appliedFile, err)
	}
	return a, nil
}

// PutApplied keeps what the host applied.
func (s State) PutApplied(a Applied) error {
	b, _ := json.Marshal(a)
	return s.write(appliedFile, b)
}

// verify checks that what the bus holds as the node's newest declaration
// is the controller's, signed for this node.
func verify(key ed25519.PublicKey, node string, got plane.Declared) (wire.Declaration, error) {
	d, err := wire.VerifyDeclaration(key, wire.NodeDeclare(node), got.Body, got.Signature)
	if err != nil {
		return wire.Declaration{}, err
	}
	if d.Node != node {
		return wire.Declaration{}, fmt.Errorf("%w: it is node %s's", wire.ErrDeclaration, d.Node)
	}
	return d, nil
}

// judge says whether the declaration read at where is to be applied over
// what was: "" if so, else why it is refused. Its revision alone decides:
// an older or equal one is an old declaration come again (a replay), or
// another saying something else at the same revision. The one applied,
// read or published again, is not judged (wire.SameDeclaration).
func judge(was Applied, d wire.Declaration, where string) string {
	if d.Revision <= was.Declaration.Revision {
		return fmt.Sprintf("revision %d (%s) is not after %d, the one applied", d.Revision, where, was.Declaration.Revision)
	}
	return ""
}

// refusalOf names what was read, so that a refusal of it is said once:
// where the bus keeps it (its position, on a bus that has them) and the
// bytes themselves (a bus that keeps no position gives one place for
// all).
func refusalOf(got plane.Declared) string {
	return fmt.Sprintf("%s\x00%s\x00%x", got.Where, got.Signature, sha256.Sum256(got.Body))
}

// reportOf is the report of the declaration applied and what runs.
func reportOf(node string, a Applied, running map[string]string, refused string, now time.Time, id string) wire.Report {
	return wire.Report{Kind: wire.KindReport, Node: node, ID: id, At: now.UTC(), Applied: a.Declaration.Revision, Running: running, Refused: refused}
}
