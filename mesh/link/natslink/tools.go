package natslink

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// The schedule of a caller asking again for an answer it has not heard:
// after askAgainFirst, then twice as long each time up to askAgainLongest,
// until the call's context ends. A runtime still running the call stays
// silent; asking is cheap.
const (
	askAgainFirst   = time.Second
	askAgainLongest = 4 * time.Second
)

// Serve subscribes mesh.mod.<module>.tool.<tool> in the tool's queue
// group, so several runtimes serving one tool compete for a call. The
// subscription is flushed before Serve returns: the server has it, and a
// subscription its user may not make has been refused (ErrDenied). Calls
// are answered one at a time, in arrival order; the reply goes to the
// inbox the call carries, which the module may answer because it was
// asked (allow_responses).
//
// Serve also subscribes the tool's subject for asking again
// (wire.ToolAgainSubject), outside the queue group: nats-server forgets
// every reply a responder may answer when it reloads its configuration,
// so an answer crossing a reload is refused and lost. A caller that heard
// nothing asks again with the same reply; the runtime that answered it
// sends the answer it kept, and the tool is not run again.
func (b *Bus) Serve(ctx context.Context, tool string, h link.ToolFunc) error {
	subject, againSubject := wire.ToolSubject(b.name, tool), wire.ToolAgainSubject(b.name, tool)
	ctx, release := b.denials.watch(ctx, subject)
	defer release()
	ctx, releaseAgain := b.denials.watch(ctx, againSubject)
	defer releaseAgain()
	before := b.nc.LastError()
	sub, err := b.nc.QueueSubscribe(subject, wire.ToolQueue(b.name, tool), func(m *nats.Msg) {
		if m.Reply == "" {
			b.log.Warn("tool call without a reply subject ignored", "tool", tool)
			return
		}
		// allow_responses lets this module publish once to whatever reply
		// its caller named, and the server checks no grant on it: answered
		// blindly, a call could have the module write into a stream (as
		// another module's event). Only a caller's inbox is answered.
		if err := wire.CheckInboxReply(m.Reply); err != nil {
			b.log.Warn("tool call refused: its reply subject is no caller's inbox", "tool", tool, "err", err)
			return
		}
		// A call is run once for its reply, whichever way it comes again.
		if out, ok := b.answers.again(m.Reply); ok {
			b.answerAgain(tool, out)
			return
		}
		reply := h(b.cfg.Context, link.Message{Header: m.Header, Body: m.Data})
		out := &nats.Msg{Subject: m.Reply, Header: nats.Header(reply.Header), Data: reply.Body}
		b.answers.keep(out)
		if err := b.nc.PublishMsg(out); err != nil {
			b.log.Error("answer tool call", "tool", tool, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("serve %s: %w", subject, mapClosed(err))
	}
	again, err := b.nc.Subscribe(againSubject, func(m *nats.Msg) {
		// Only an answer kept for exactly this reply is sent, and only
		// there: a runtime that did not take the call, or has not
		// answered it yet, stays silent, and the caller asks again.
		if out, ok := b.answers.again(m.Reply); ok {
			b.answerAgain(tool, out)
		}
	})
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("serve %s: %w", againSubject, mapClosed(err))
	}
	unsubscribe := func() {
		_ = sub.Unsubscribe()
		_ = again.Unsubscribe()
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		unsubscribe()
		return fmt.Errorf("serve %s: %w", subject, b.callError(ctx, err))
	}
	// The server refuses a subscription before it answers the flush, and
	// nats.go records the refusal as the connection's last error before it
	// reads the pong; the error handler, which runs on another goroutine,
	// may not have run yet. So the refusal is read from both.
	if d := denied(ctx); d != nil {
		unsubscribe()
		return fmt.Errorf("serve %s: %w", subject, d)
	}
	if last := b.nc.LastError(); last != nil && last != before && (refuses(last, subject) || refuses(last, againSubject)) {
		unsubscribe()
		return fmt.Errorf("serve %s: %w: %w", subject, link.ErrDenied, last)
	}
	return nil
}

// answerAgain sends an answer kept for a caller that asked again.
func (b *Bus) answerAgain(tool string, out *nats.Msg) {
	if err := b.nc.PublishMsg(out); err != nil {
		b.log.Error("answer tool call again", "tool", tool, "err", err)
	}
}

// Request calls mesh.mod.<module>.tool.<tool> on core NATS and returns the
// reply as it came. The server answers a call nobody serves with a
// no-responders status (ErrNoResponders); a call the account may not make
// is refused asynchronously and reported as ErrDenied at once. A call not
// answered within askAgainFirst is asked again (wire.ToolAgainSubject),
// and again on the schedule above, until ctx ends: its answer may have
// been lost to a reload of the server's configuration.
func (b *Bus) Request(ctx context.Context, module, tool string, body []byte) (link.Message, error) {
	subject := wire.ToolSubject(module, tool)
	ctx, release := b.denials.watch(ctx, subject)
	defer release()
	reply, err := b.call(ctx, subject, wire.ToolAgainSubject(module, tool), body)
	if err != nil {
		return link.Message{}, b.callError(ctx, err)
	}
	return link.Message{Header: reply.Header, Body: reply.Data}, nil
}

// call publishes body on subject with a reply of its own and waits for
// the first answer there, asking again on again while none comes.
//
// The server's no-responders status is an answer only before the call is
// asked again: nobody serves the tool. After, a status may be the asking's
// own, heard by nobody: a runtime that serves the tool but not the asking
// again (another implementation, an older SDK) may still answer, and the
// call waits on until its end.
func (b *Bus) call(ctx context.Context, subject, again string, body []byte) (*nats.Msg, error) {
	reply, p, done, err := b.replies.open()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := b.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: body}); err != nil {
		return nil, err
	}
	asked := false
	wait := askAgainFirst
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case m := <-p.answer:
			return m, nil
		case <-p.nobody:
			if !asked {
				return nil, nats.ErrNoResponders
			}
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
		// What came as the timer fired is read before asking.
		select {
		case m := <-p.answer:
			return m, nil
		case <-p.nobody:
			if !asked {
				return nil, nats.ErrNoResponders
			}
		default:
		}
		if err := b.nc.PublishMsg(&nats.Msg{Subject: again, Reply: reply}); err != nil {
			return nil, err
		}
		asked = true
		wait = min(2*wait, askAgainLongest)
		timer.Reset(wait)
	}
}
