package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The enrolment handshake (design 25 §6). A node holding a token connects
// as the token's enrolment user, publishes an EnrolRequest on
// SubjectEnrol (it lands in CONTROL through ENROL's service import), and
// waits on the reply subject the request names, under the token's own
// inbox. The controller answers there with an EnrolAnswer: the node's
// credential sealed to the key the request carried, or a refusal.

// EnrolRequest is a node's claim of a token.
type EnrolRequest struct {
	// Token is the token's id; Proof its secret (the enrolment user's
	// password): a request naming another token's id proves nothing.
	Token string `json:"token"`
	Proof string `json:"proof"`
	// SealingKey is the node's public sealing key (seal.EncodePublic).
	SealingKey string `json:"sealing_key"`
	// Reply is where the answer goes: under EnrolInbox(Token), carried in
	// the payload because the CONTROL consumer's delivery has its own.
	Reply string `json:"reply"`
}

// EnrolAnswer is the controller's answer: Sealed (the node's host
// credential document, sealed to its key) for Node, or Refused, the
// reason.
type EnrolAnswer struct {
	Node    string `json:"node,omitempty"`
	Sealed  []byte `json:"sealed,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// ErrEnrolRequest is wrapped by every refusal of a request's form.
var ErrEnrolRequest = errors.New("malformed enrolment request")

// MaxEnrolRequest bounds a request: ENROL's max_payload is larger, and a
// claim needs no more.
const MaxEnrolRequest = 4 << 10

// ParseEnrolRequest reads a request strictly: one JSON object, no field
// unknown or missing, the reply under the token's inbox.
func ParseEnrolRequest(data []byte) (EnrolRequest, error) {
	if len(data) > MaxEnrolRequest {
		return EnrolRequest{}, fmt.Errorf("%w: %d bytes, more than %d", ErrEnrolRequest, len(data), MaxEnrolRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r EnrolRequest
	if err := dec.Decode(&r); err != nil {
		return EnrolRequest{}, fmt.Errorf("%w: %v", ErrEnrolRequest, err)
	}
	if dec.More() {
		return EnrolRequest{}, fmt.Errorf("%w: more than one JSON value", ErrEnrolRequest)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"token", r.Token}, {"proof", r.Proof}, {"sealing_key", r.SealingKey}, {"reply", r.Reply}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return EnrolRequest{}, fmt.Errorf("%w: missing %s", ErrEnrolRequest, strings.Join(missing, ", "))
	}
	if err := CheckName(r.Token); err != nil {
		return EnrolRequest{}, fmt.Errorf("%w: token: %v", ErrEnrolRequest, err)
	}
	// The token's own inbox on NATS, its answer queue on AMQP: which of
	// the two the bus the request came on takes is that bus's to check
	// again where the answer leaves (plane.Answerer.CheckEnrolReply).
	if err := CheckEnrolReply(r.Token, r.Reply); err != nil {
		if CheckEnrolQueue(r.Token, r.Reply) != nil {
			return EnrolRequest{}, fmt.Errorf("%w: %v (nor is it the token's answer queue %s)", ErrEnrolRequest, err, EnrolQueue(r.Token))
		}
	}
	return r, nil
}

// Marshal is the request as it goes on the wire.
func (r EnrolRequest) Marshal() []byte {
	b, _ := json.Marshal(r)
	return b
}

// Marshal is the answer as it goes on the wire.
func (a EnrolAnswer) Marshal() []byte {
	b, _ := json.Marshal(a)
	return b
}

// CredentialsAnswer is the controller's answer to a host asking for its
// modules' credentials (NodeCredentials): each declared module's
// credential document sealed to the node's key, by module, or Refused.
type CredentialsAnswer struct {
	Sealed  map[string][]byte `json:"sealed,omitempty"`
	Refused string            `json:"refused,omitempty"`
	// Next are the node's credentials on the bus a cutover moves it to,
	// while one does (Move).
	Next *NextCredentials `json:"next,omitempty"`
}

// Marshal is the answer as it goes on the wire.
func (a CredentialsAnswer) Marshal() []byte {
	b, _ := json.Marshal(a)
	return b
}
