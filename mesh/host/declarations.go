package host

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// Applied is what the host last applied: the declaration and the NODES
// sequence it was stored at. A declaration is taken only when both its
// sequence and its revision are above these: NODES keeps the newest per
// subject, so a lower sequence is an old one come again, and a lower or
// equal revision at a higher sequence is an old declaration published
// anew (a replay).
type Applied struct {
	Seq         uint64           `json:"seq"`
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

// errNoDeclaration: NODES holds nothing for the node yet.
var errNoDeclaration = errors.New("NODES holds no declaration for this node")

// newest reads the node's newest declaration from NODES by a direct get
// (the one JetStream API subject a host is granted), with the sequence
// NODES stored it at, and checks it is the controller's for this node.
func newest(ctx context.Context, nc *nats.Conn, key ed25519.PublicKey, node string) (wire.Declaration, uint64, error) {
	subject := wire.NodeDeclare(node)
	msg, err := nc.RequestWithContext(ctx, wire.DirectGetLast(wire.StreamNodes, subject), nil)
	if err != nil {
		return wire.Declaration{}, 0, fmt.Errorf("read %s: %w", subject, err)
	}
	if status := msg.Header.Get(wire.HeaderNATSStatus); status == "404" {
		return wire.Declaration{}, 0, errNoDeclaration
	} else if status != "" {
		return wire.Declaration{}, 0, fmt.Errorf("read %s: status %s %s", subject, status, msg.Header.Get(wire.HeaderNATSDescription))
	}
	// The server adds the sequence to the stored headers; a publisher may
	// have put one there itself, to pass an old declaration for a new one:
	// an answer with more than one is not read.
	seqs := msg.Header.Values(nats.JSSequence)
	if len(seqs) != 1 {
		return wire.Declaration{}, 0, fmt.Errorf("%w: read %s: the answer carries %d sequences, not the server's one", wire.ErrDeclaration, subject, len(seqs))
	}
	seq, err := strconv.ParseUint(seqs[0], 10, 64)
	if err != nil {
		return wire.Declaration{}, 0, fmt.Errorf("read %s: no sequence in the answer", subject)
	}
	d, err := wire.VerifyDeclaration(key, subject, msg.Data, msg.Header.Get(wire.HeaderSignature))
	if err != nil {
		return wire.Declaration{}, seq, err
	}
	if d.Node != node {
		return wire.Declaration{}, seq, fmt.Errorf("%w: it is node %s's", wire.ErrDeclaration, d.Node)
	}
	return d, seq, nil
}

// judge says whether the declaration at seq is to be applied over what
// was: "" if so, else why it is refused.
func judge(was Applied, d wire.Declaration, seq uint64) string {
	switch {
	case seq <= was.Seq:
		return fmt.Sprintf("NODES sequence %d is not after %d, the one applied", seq, was.Seq)
	case d.Revision <= was.Declaration.Revision:
		return fmt.Sprintf("revision %d (NODES sequence %d) is not after %d, the one applied", d.Revision, seq, was.Declaration.Revision)
	}
	return ""
}

// republished says whether the declaration at seq is the one applied,
// published again: the controller's guard putting it back after something
// else landed there, or a controller restarted signing it again from its
// store, whose spelling of a configuration may differ. It is kept as
// applied at its new sequence; it is no refusal.
func republished(was Applied, d wire.Declaration, seq uint64) bool {
	return seq > was.Seq && wire.SameDeclaration(d, was.Declaration)
}

// reportOf is the report of the declaration applied and what runs.
func reportOf(node string, a Applied, running map[string]string, refused string, now time.Time, id string) wire.Report {
	return wire.Report{Kind: wire.KindReport, Node: node, ID: id, At: now.UTC(), Applied: a.Declaration.Revision, Running: running, Refused: refused}
}
