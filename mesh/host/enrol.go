// Package host is the mesh's host: what runs on a node, enrols it with a
// token, takes its declarations from NODES and runs its modules
// (design 25 §6, §10 step 4).
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// ErrRefused is wrapped when the controller refused the enrolment; the
// error carries its reason. Asking again will not help.
var ErrRefused = errors.New("enrolment refused")

// ErrNotSent is wrapped when the request did not reach CONTROL: the bus
// was away, or did not let the token's user in yet. Asking again may help.
var ErrNotSent = errors.New("the enrolment request did not reach the controller")

// ErrNoAnswer is wrapped when the request reached CONTROL but the
// connection closed, or dropped to reconnect, with no answer read.
// Asking again with the same sealing key is answered from the
// controller's ledger while the spent token's user is in its grace
// (controller.SpentTokenGrace); past it, the login is refused, and the
// node needs a new token.
var ErrNoAnswer = errors.New("the connection closed before the enrolment was answered")

// enrolRetry is how long a request the bus did not confirm waits before it
// is published again (with the same message id, so CONTROL keeps one).
const enrolRetry = 2 * time.Second

// Enrol claims the token (an enrolment credential, as mesh-controller
// token issue printed it) for the node, with key as the node's sealing
// key, and returns the node's own credential, opened from the sealed
// answer. It publishes the request until CONTROL confirms it holds it,
// and waits on the token's inbox, from the first publish, for as long as
// ctx allows: the controller answers once its store takes the claim,
// which may be after several of its own retries (design 25 §2: the reply
// travels in the payload for exactly this). An answer ends the wait
// however far the confirmation has come. Before the request is
// confirmed, an error wraps ErrNotSent, and asking again may help. After,
// a connection interrupted with no answer read wraps ErrNoAnswer: asking
// again with the same key is answered while the token is in its grace.
func Enrol(ctx context.Context, token wire.Credential, key seal.Key, opts ...link.Option) (wire.Credential, error) {
	if token.Principal != wire.PrincipalEnrol {
		return wire.Credential{}, fmt.Errorf("enrol: the credential is %s's, not an enrolment token's", token.User())
	}
	nc, err := link.Dial(ctx, token, opts...)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("%w: connect as %s: %w", ErrNotSent, token.User(), err)
	}
	defer nc.Close()
	reply := wire.EnrolInbox(token.Name) + "." + nuid.Next()
	// A channel, not a synchronous subscription: the composition that
	// follows the answer revokes the token's user, and the server then
	// closes this connection, perhaps before the answer it has already
	// delivered is read. nats.go refuses NextMsg on a closed connection
	// even with the message pending; a channel keeps what arrived.
	answers := make(chan *nats.Msg, 4)
	// A connection that closes, or drops and comes back, may have missed
	// the answer: the core publish is not kept for it.
	interrupted := nc.StatusChanged(nats.CLOSED, nats.RECONNECTING)
	if _, err := nc.ChanSubscribe(reply, answers); err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: subscribe %s: %w", reply, err)
	}
	req := wire.EnrolRequest{Token: token.Name, Proof: token.Password(), SealingKey: seal.EncodePublic(key.Public), Reply: reply}
	// The request is published until it is confirmed, and the answer
	// awaited all the while: under load the answer may come before the
	// confirmation does, and the composition after it revokes the
	// token's user, so a confirmation still awaited then never comes.
	pctx, stopPublishing := context.WithCancel(ctx)
	defer stopPublishing()
	confirmed := make(chan error, 1)
	go func() { confirmed <- publishConfirmed(pctx, nc, req.Marshal()) }()
	msg, err := awaitAnswer(ctx, answers, confirmed, interrupted)
	if errors.Is(err, ErrNotSent) {
		return wire.Credential{}, err
	}
	if err != nil {
		return wire.Credential{}, fmt.Errorf("enrol: no answer on %s: %w", reply, err)
	}
	var a wire.EnrolAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
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

// awaitAnswer waits for the answer, whatever the confirmation's state: an
// answer ends the wait. A confirmation that fails, or a connection
// interrupted (closed, or dropped to reconnect) before the request was
// confirmed with no answer read, is ErrNotSent; one interrupted after is
// an answer perhaps missed, ErrNoAnswer, and the caller asks again with
// the same key. Whatever the connection read before the interruption is
// in answers, and is taken.
func awaitAnswer(ctx context.Context, answers <-chan *nats.Msg, confirmed <-chan error, interrupted <-chan nats.Status) (*nats.Msg, error) {
	sent := false
	for {
		select {
		case msg := <-answers:
			return msg, nil
		case err := <-confirmed:
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
			}
			sent, confirmed = true, nil
		case st := <-interrupted:
			select {
			case msg := <-answers:
				return msg, nil
			default:
			}
			if !sent {
				return nil, fmt.Errorf("%w: the connection was %s before CONTROL confirmed the request", ErrNotSent, st)
			}
			return nil, fmt.Errorf("%w: the connection was %s", ErrNoAnswer, st)
		case <-ctx.Done():
			if !sent {
				return nil, fmt.Errorf("%w: the request was not confirmed: %w", ErrNotSent, context.Cause(ctx))
			}
			return nil, context.Cause(ctx)
		}
	}
}

// publishConfirmed publishes the request on SubjectEnrol until CONTROL
// acknowledges holding it. The enrolment account has no JetStream of its
// own: the request reaches CONTROL through a service import, and the
// acknowledgement comes back as the answer to a plain request.
func publishConfirmed(ctx context.Context, nc *nats.Conn, data []byte) error {
	id := nuid.Next()
	for {
		msg := nats.NewMsg(wire.SubjectEnrol)
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, id)
		rctx, cancel := context.WithTimeout(ctx, enrolRetry)
		res, err := nc.RequestMsgWithContext(rctx, msg)
		cancel()
		if err == nil {
			var ack struct {
				Stream string `json:"stream"`
				Error  *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if jerr := json.Unmarshal(res.Data, &ack); jerr != nil {
				err = fmt.Errorf("not a JetStream acknowledgement: %q", res.Data)
			} else if ack.Error != nil {
				err = errors.New(ack.Error.Description)
			} else if ack.Stream != wire.StreamControl {
				err = fmt.Errorf("acknowledged by stream %q, not %s", ack.Stream, wire.StreamControl)
			} else {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("enrol: the request was not confirmed: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("enrol: the request was not confirmed: %w", err)
		case <-time.After(enrolRetry / 4):
		}
	}
}
