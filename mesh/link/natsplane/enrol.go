package natsplane

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
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// enrolRetry is how long a request the bus did not confirm waits before it
// is published again (with the same message id, so CONTROL keeps one).
const enrolRetry = 2 * time.Second

// NewEnroller is the enrolment of token (an enrolment credential, as
// mesh-controller token issue printed it): each Enrol dials as the
// token's user, with opts.
func NewEnroller(token wire.Credential, opts ...link.Option) plane.Enroller {
	return enroller{token: token, opts: opts}
}

type enroller struct {
	token wire.Credential
	opts  []link.Option
}

// Enrol names as the reply an inbox under wire.EnrolInbox(token) that
// only the token's user may read, with a suffix of its own, publishes
// request(reply) on wire.SubjectEnrol until CONTROL confirms it holds it,
// and waits on the inbox, from the first publish, for as long as ctx
// allows: the controller answers once its store takes the claim, which
// may be after several of its own retries (design 25 §2: the reply travels
// in the payload for exactly this). An answer ends the wait however far
// the confirmation has come. A login the server refused wraps both
// plane.ErrNotSent and plane.ErrLoginRefused.
func (e enroller) Enrol(ctx context.Context, request func(reply string) []byte) ([]byte, error) {
	nc, err := link.Dial(ctx, e.token, e.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plane.ErrNotSent, loginError(fmt.Errorf("connect as %s: %w", e.token.User(), err)))
	}
	defer nc.Close()
	reply := wire.EnrolInbox(e.token.Name) + "." + nuid.Next()
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
		return nil, fmt.Errorf("%w: subscribe %s: %w", plane.ErrNotSent, reply, err)
	}
	data := request(reply)
	// The request is published until it is confirmed, and the answer
	// awaited all the while: under load the answer may come before the
	// confirmation does, and the composition after it revokes the
	// token's user, so a confirmation still awaited then never comes.
	pctx, stopPublishing := context.WithCancel(ctx)
	defer stopPublishing()
	confirmed := make(chan error, 1)
	go func() { confirmed <- publishConfirmed(pctx, nc, data) }()
	msg, err := awaitAnswer(ctx, answers, confirmed, interrupted)
	if errors.Is(err, plane.ErrNotSent) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("no answer on %s: %w", reply, err)
	}
	return msg.Data, nil
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
				return nil, fmt.Errorf("%w: %w", plane.ErrNotSent, err)
			}
			sent, confirmed = true, nil
		case st := <-interrupted:
			select {
			case msg := <-answers:
				return msg, nil
			default:
			}
			if !sent {
				return nil, fmt.Errorf("%w: the connection was %s before CONTROL confirmed the request", plane.ErrNotSent, st)
			}
			return nil, fmt.Errorf("%w: the connection was %s", plane.ErrNoAnswer, st)
		case <-ctx.Done():
			if !sent {
				return nil, fmt.Errorf("%w: the request was not confirmed: %w", plane.ErrNotSent, context.Cause(ctx))
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
