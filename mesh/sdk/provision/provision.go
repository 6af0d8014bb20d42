// Package provision is the provisioning capability of the Go SDK (design
// 19, "Capability: provisioning"; ADR 0224, ADR 0230): the grant a provider
// reads from the contributions file, and the provider loop that creates,
// checks, retires and reports on its consumers.
//
// It is transport-neutral. It needs a way to publish an event and a way to
// serve a tool, which the SDK's module gives (adapted in one line each, see
// PublisherFunc and ServerFunc); it does not import the SDK.
//
// The loop's rules:
//
//   - Failing. A consumer the loop has failed for five minutes without one
//     success (its create, its periodic check, or reading its secret — all
//     inside Ensure and Check) is announced as provisioner.failing, and
//     again every fifteen minutes while it lasts. Its first success after
//     that, its withdrawal, and its first success since this process
//     started are provisioner.recovered.
//   - Retirement. A consumer is active, retired or deleted. The set of
//     active consumers nobody asks for is retired only once the same set
//     has been found unasked in five consecutive readings of the
//     contributions file and for ten minutes. Retiring disables access
//     reversibly and marks it with when and why; a provider with no way to
//     disable only marks it and keeps its access. A set of more than three,
//     or of more than half of the active consumers held, waits for a person
//     instead. Asked for again, the ordinary create (Ensure) re-enables.
//     Only a person deletes, through provisioner_delete, and only a retired
//     consumer.
//
// The rules live in a pure state machine (machine.go) that is given the time
// and what was observed and answers what to do; Loop is the thin driver
// that reads the file, calls the Provider and publishes.
package provision

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Provider is what a providing module implements: its own backend's side
// of provisioning. The loop calls it from one goroutine at a time.
type Provider interface {
	// Ensure is the ordinary create: it makes the consumer's instance, or
	// brings it to the grant, and reads the secret the mesh minted for it.
	// For a retired consumer it also re-enables access and clears the
	// mark. It must be idempotent: the loop calls it again after any
	// failure and whenever the grant changes.
	Ensure(ctx context.Context, g Grant) error
	// Check is the periodic check that an instance Ensure made is still
	// there and usable. A failed check makes the next pass Ensure again.
	Check(ctx context.Context, g Grant) error
	// Held lists the consumers the backend holds (active and retired,
	// never deleted), with their retirement marks: the loop's memory across
	// restarts lives in the provider's backend, not in the process.
	Held(ctx context.Context) ([]Held, error)
	// Disable takes the consumer's access away reversibly. A provider with
	// no way to disable returns ErrNoDisable, and the loop then only marks
	// the consumer, its access kept.
	Disable(ctx context.Context, c Consumer) error
	// Mark records the retirement, with when and why, in the backend, so
	// that Held reports the consumer retired.
	Mark(ctx context.Context, c Consumer, m Mark) error
	// Delete removes a retired consumer's instance for good. The loop calls
	// it only for provisioner_delete, asked by a person, and only for a
	// consumer that is retired and not asked for.
	Delete(ctx context.Context, c Consumer) error
}

// Publisher publishes an event in the module's own namespace. The SDK's
// module is adapted with PublisherFunc.
type Publisher interface {
	Publish(ctx context.Context, key string, body []byte) error
}

// ToolHandler answers one tool call: JSON arguments in, JSON result out; an
// error reaches the caller as the tool's error.
type ToolHandler = func(ctx context.Context, args []byte) ([]byte, error)

// Server serves the module's tools. The SDK's module is adapted with
// ServerFunc.
type Server interface {
	Handle(tool string, h ToolHandler) error
}

// PublisherFunc adapts a function to Publisher, for instance
//
//	provision.PublisherFunc(func(ctx context.Context, key string, body []byte) error { _, err := m.Publish(ctx, key, body); return err })
type PublisherFunc func(ctx context.Context, key string, body []byte) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, key string, body []byte) error {
	return f(ctx, key, body)
}

// ServerFunc adapts a function to Server, for instance
//
//	provision.ServerFunc(func(tool string, h provision.ToolHandler) error { return m.Handle(tool, h) })
type ServerFunc func(tool string, h ToolHandler) error

// Handle calls f.
func (f ServerFunc) Handle(tool string, h ToolHandler) error { return f(tool, h) }

// Consumer is who asks for a provision: a module on a machine, never a
// machine alone.
type Consumer struct {
	// Module is the consuming module, the entry's as.
	Module string
	// Node is the machine it runs on.
	Node string
}

func (c Consumer) ref() wire.ConsumerRef { return wire.ConsumerRef{Consumer: c.Module, Node: c.Node} }

// LogValue keeps logs naming a consumer the same everywhere.
func (c Consumer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("module", c.Module), slog.String("node", c.Node))
}

// Grant is one entry of the contributions file, read to one consumer.
type Grant struct {
	Consumer
	// Secret is the secret the mesh minted for the consumer, opaque here;
	// never logged (LogValue leaves it out).
	Secret string
	// At is when the consumer contributed; zero when the entry had none.
	At time.Time
	// Values is what the consumer contributed, a JSON object or nil.
	Values json.RawMessage
}

// LogValue leaves the secret out of logs.
func (g Grant) LogValue() slog.Value {
	return slog.GroupValue(slog.String("module", g.Module), slog.String("node", g.Node), slog.Time("at", g.At))
}

// Held is a consumer the backend holds.
type Held struct {
	Consumer
	// Retired is the retirement mark, nil for an active consumer.
	Retired *Mark
}

// Mark is a retirement as the backend records it.
type Mark struct {
	// At is when the consumer was retired.
	At time.Time
	// Why says what retired it.
	Why string
	// AccessKept is true when the provider could not disable, so the
	// consumer was only marked.
	AccessKept bool
}

// Sentinel errors callers branch on.
var (
	// ErrNoDisable is returned by a Provider's Disable when it has no way
	// to disable a consumer.
	ErrNoDisable = errors.New("provider cannot disable a consumer")
	// ErrNotRetired refuses provisioner_delete of a consumer that is not
	// retired: nothing but a person deletes, and only what is retired.
	ErrNotRetired = errors.New("consumer is not retired")
	// ErrUnknownConsumer refuses a tool call naming a consumer the provider
	// neither holds nor is asked for.
	ErrUnknownConsumer = errors.New("unknown consumer")
	// ErrNoSuchSet refuses approving or rejecting a set that is not the one
	// waiting for a person (it changed, or never waited).
	ErrNoSuchSet = errors.New("no such pending set")
	// ErrBadArgs refuses a tool call whose arguments do not parse.
	ErrBadArgs = errors.New("invalid arguments")
)

// ClassError gives an error the class a provisioner.failing names. A
// Provider wraps its errors with WithClass.
type ClassError struct {
	Class string
	Err   error
}

func (e *ClassError) Error() string { return e.Class + ": " + e.Err.Error() }

// Unwrap returns the classified error.
func (e *ClassError) Unwrap() error { return e.Err }

// WithClass wraps err with a class of error, one of wire's Class* values.
func WithClass(class string, err error) error {
	if err == nil {
		return nil
	}
	return &ClassError{Class: class, Err: err}
}

// Classify answers the class of err: the class of the outermost ClassError
// in its chain, a timeout for a missed deadline, else unknown.
func Classify(err error) string {
	var ce *ClassError
	if errors.As(err, &ce) && ce.Class != "" {
		return ce.Class
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return wire.ClassTimeout
	}
	return wire.ClassUnknown
}
