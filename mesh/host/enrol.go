// Package host is the mesh's host: what runs on a node, enrols it with a
// token, takes its declarations from the bus (NODES, on NATS) and runs
// its modules (design 25 §6, §10 step 4). It speaks to the bus through
// the control plane's seam alone (packages plane and buses), so that the
// same host runs on either bus, chosen by its credential's scheme.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrRefused is wrapped when the controller refused the enrolment; the
// error carries its reason. Asking again will not help.
var ErrRefused = errors.New("enrolment refused")

// ErrNotSent is wrapped when the request did not reach CONTROL: the bus
// was away, or did not let the token's user in yet (then the error wraps
// plane.ErrLoginRefused too). Asking again may help.
var ErrNotSent = plane.ErrNotSent

// ErrNoAnswer is wrapped when the request reached CONTROL but the
// connection closed, or dropped to reconnect, with no answer read.
// Asking again with the same sealing key is answered from the
// controller's ledger while the spent token's user is in its grace
// (controller.SpentTokenGrace); past it, the login is refused, and the
// node needs a new token.
var ErrNoAnswer = plane.ErrNoAnswer

// Enrol claims the token (an enrolment credential, as mesh-controller
// token issue printed it) for the node, with key as the node's sealing
// key, on the bus the token is for, and returns the node's own
// credential, opened from the sealed answer. The bus sends the claim
// until CONTROL holds it and waits for the answer for as long as ctx
// allows (plane.Enroller): the controller answers once its store takes
// the claim, which may be after several of its own retries. Before the
// request is confirmed, an error wraps ErrNotSent, and asking again may
// help. After, a connection interrupted with no answer read wraps
// ErrNoAnswer: asking again with the same key is answered while the
// token is in its grace.
func Enrol(ctx context.Context, token wire.Credential, key seal.Key, opts ...link.Option) (wire.Credential, error) {
	if token.Principal != wire.PrincipalEnrol {
		return wire.Credential{}, fmt.Errorf("enrol: the credential is %s's, not an enrolment token's", token.User())
	}
	var reply string
	answer, err := buses.Enrol(ctx, token, func(r string) []byte {
		reply = r
		req := wire.EnrolRequest{Token: token.Name, Proof: token.Password(), SealingKey: seal.EncodePublic(key.Public), Reply: r}
		return req.Marshal()
	}, opts...)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: %w", err)
	}
	var a wire.EnrolAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: the answer is not one: %w", err)
	}
	if a.Refused != "" {
		return wire.Credential{}, fmt.Errorf("%w: %s", ErrRefused, a.Refused)
	}
	doc, err := key.Open(a.Sealed)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: the answer for node %s on %s: %w (not sealed to this node's key; nothing kept)", a.Node, reply, err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: the sealed credential: %w", err)
	}
	if cred.Principal != wire.PrincipalHost || cred.Node != a.Node {
		return wire.Credential{}, fmt.Errorf("enrol: the sealed credential is %s's, not node %s's host", cred.User(), a.Node)
	}
	return cred, nil
}
