package sdk

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Handle serves tool: every call runs h, in a queue group with every
// other runtime serving the same tool, so each call is answered once. A
// handler's error or panic reaches the caller as a *ToolError. A tool the
// module's manifest does not declare is refused by the bus: ErrDenied.
func (m *Module) Handle(tool string, h ToolHandler) error {
	if h == nil {
		return fmt.Errorf("handle %q: %w: nil handler", tool, ErrInvalid)
	}
	if m.person {
		return errPerson("handle " + tool)
	}
	if err := wire.CheckToolName(tool); err != nil {
		return fmt.Errorf("handle %q: %w: %w", tool, ErrInvalid, err)
	}
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return ErrClosed
	case m.tools[tool]:
		m.mu.Unlock()
		return fmt.Errorf("handle %q: %w: already handled", tool, ErrInvalid)
	}
	m.tools[tool] = true
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(m.ctx, m.timeout)
	defer cancel()
	err := m.bus.Serve(ctx, tool, func(ctx context.Context, req link.Message) link.Message {
		out, err := runTool(ctx, h, req.Body)
		if err != nil {
			m.log.Warn("tool handler failed", append([]any{"tool", tool}, failure(err)...)...)
			return link.Message{Header: wire.ToolErrorHeaders(err.Error())}
		}
		return link.Message{Body: out}
	})
	if err != nil {
		m.mu.Lock()
		delete(m.tools, tool)
		m.mu.Unlock()
		return fmt.Errorf("handle %q: %w", tool, err)
	}
	return nil
}

// Request calls module's tool with args and returns its result. ctx
// bounds the wait (DefaultTimeout when it has no deadline). A failing
// handler is a *ToolError, nobody serving the tool ErrNoResponders,
// silence ErrTimeout, a tool the manifest's uses do not grant ErrDenied.
func (m *Module) Request(ctx context.Context, module, tool string, args []byte) ([]byte, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	if err := wire.CheckName(module); err != nil {
		return nil, fmt.Errorf("call %s.%s: %w: %w", module, tool, ErrInvalid, err)
	}
	if err := wire.CheckToolName(tool); err != nil {
		return nil, fmt.Errorf("call %s.%s: %w: %w", module, tool, ErrInvalid, err)
	}
	ctx, cancel := m.bounded(ctx)
	defer cancel()
	reply, err := m.bus.Request(ctx, module, tool, args)
	if err != nil {
		return nil, fmt.Errorf("call %s.%s: %w", module, tool, err)
	}
	if msg, failed := wire.ToolFailure(reply.Header); failed {
		return nil, &ToolError{Module: module, Tool: tool, Message: msg}
	}
	return reply.Body, nil
}
