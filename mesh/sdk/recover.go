package sdk

import (
	"context"
	"fmt"
	"runtime/debug"
)

// panicError is a handler's panic turned into its error: the caller of a
// tool gets the value, the module's log gets the stack too.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.value) }

// runEvent runs one event handler, turning a panic into its error.
func runEvent(ctx context.Context, h EventHandler, e Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h(ctx, e)
}

// runTool runs one tool handler, turning a panic into its error.
func runTool(ctx context.Context, h ToolHandler, args []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h(ctx, args)
}

// failure is the log attributes of a handler's error: the stack of a panic.
func failure(err error) []any {
	attrs := []any{"err", err}
	if p, ok := err.(*panicError); ok {
		attrs = append(attrs, "stack", string(p.stack))
	}
	return attrs
}
