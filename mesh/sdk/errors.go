package sdk

import (
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
)

// Sentinel errors a module branches on. Every error of this package that
// has one of these causes wraps it.
var (
	// ErrNoResponders means nobody serves the tool called.
	ErrNoResponders = link.ErrNoResponders
	// ErrTimeout means the call's context ended before an answer came.
	ErrTimeout = link.ErrTimeout
	// ErrNoConsumer means the mesh has not created the module's consumer
	// (or the module's manifest consumes nothing); the error names it.
	ErrNoConsumer = link.ErrNoConsumer
	// ErrDenied means the bus refused what the module's account has no
	// grant for: an event it does not emit, a tool it does not use.
	ErrDenied = link.ErrDenied
	// ErrFingerprint means the bus presented a certificate other than the
	// one the credential pins.
	ErrFingerprint = link.ErrFingerprint
	// ErrClosed means the module was closed.
	ErrClosed = link.ErrClosed
	// ErrTransport means no binding is linked in for the credential URL's
	// scheme.
	ErrTransport = link.ErrUnsupported
	// ErrBootstrap means the credential is a bootstrap URL, which is never
	// an ordinary credential.
	ErrBootstrap = errors.New("a bootstrap URL is not a module's credential")
	// ErrInvalid means an argument cannot be put on the wire: a key,
	// pattern, tool or module name, or a body that is not JSON.
	ErrInvalid = errors.New("invalid argument")
)

// ToolError is a tool's handler failing (or panicking), as its caller
// receives it: never a crash, never a timeout.
type ToolError struct {
	// Module and Tool name the tool called.
	Module, Tool string
	// Message is the handler's error message.
	Message string
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("tool %s.%s failed: %s", e.Module, e.Tool, e.Message)
}
