package natslink

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Serve subscribes mesh.mod.<module>.tool.<tool> in the tool's queue
// group, so several runtimes serving one tool compete for a call. The
// subscription is flushed before Serve returns: the server has it, and a
// subscription its user may not make has been refused (ErrDenied). Calls
// are answered one at a time, in arrival order; the reply goes to the
// inbox the call carries, which the module may answer because it was
// asked (allow_responses).
func (b *Bus) Serve(ctx context.Context, tool string, h link.ToolFunc) error {
	subject := wire.ToolSubject(b.name, tool)
	ctx, release := b.denials.watch(ctx, subject)
	defer release()
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
		reply := h(b.cfg.Context, link.Message{Header: m.Header, Body: m.Data})
		out := &nats.Msg{Subject: m.Reply, Header: nats.Header(reply.Header), Data: reply.Body}
		if err := m.RespondMsg(out); err != nil {
			b.log.Error("answer tool call", "tool", tool, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("serve %s: %w", subject, mapClosed(err))
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("serve %s: %w", subject, b.callError(ctx, err))
	}
	// The server refuses a subscription before it answers the flush, and
	// nats.go records the refusal as the connection's last error before it
	// reads the pong; the error handler, which runs on another goroutine,
	// may not have run yet. So the refusal is read from both.
	if d := denied(ctx); d != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("serve %s: %w", subject, d)
	}
	if last := b.nc.LastError(); last != nil && last != before && refuses(last, subject) {
		_ = sub.Unsubscribe()
		return fmt.Errorf("serve %s: %w: %w", subject, link.ErrDenied, last)
	}
	return nil
}

// Request calls mesh.mod.<module>.tool.<tool> on core NATS and returns the
// reply as it came. The server answers a call nobody serves with a
// no-responders status (ErrNoResponders); a call the account may not make
// is refused asynchronously and reported as ErrDenied at once.
func (b *Bus) Request(ctx context.Context, module, tool string, body []byte) (link.Message, error) {
	subject := wire.ToolSubject(module, tool)
	ctx, release := b.denials.watch(ctx, subject)
	defer release()
	reply, err := b.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return link.Message{}, b.callError(ctx, err)
	}
	return link.Message{Header: reply.Header, Body: reply.Data}, nil
}
