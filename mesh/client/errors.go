package client

import (
	"errors"
	"fmt"
)

// Kind is what a failure of the client was, as a caller branches on it:
// each has its own message and its own exit status in cmd/mesh (Exit). A
// Kind is an error itself, so errors.Is(err, KindDenied) tells one apart;
// every *Error wraps its Kind and its cause.
type Kind int

// The kinds of failure, numbered as cmd/mesh's exit statuses (0 is no
// failure).
const (
	// KindFailed is any failure not named below: the bus unreachable, a
	// catalogue that is not one, the connection lost.
	KindFailed Kind = 1
	// KindUsage is bad input, refused before anything was sent: a tool
	// name not in <module>.<tool> form, arguments that are not a JSON
	// object, a credential that is not a person's.
	KindUsage Kind = 2
	// KindTool is the tool's own failure: its handler returned an error.
	KindTool Kind = 3
	// KindNoResponders is a tool the catalogue lists that nobody serves.
	KindNoResponders Kind = 4
	// KindTimeout is a tool that did not answer in time.
	KindTimeout Kind = 5
	// KindDenied is a call the bus refused: the person has no grant for
	// the tool.
	KindDenied Kind = 6
	// KindRefused is the person's credential refused by the bus at login:
	// revoked, or never issued.
	KindRefused Kind = 7
	// KindNoSuchTool is a tool the mesh's catalogue does not list.
	KindNoSuchTool Kind = 8
)

var kindNames = map[Kind]string{
	KindFailed:       "failed",
	KindUsage:        "bad input",
	KindTool:         "the tool failed",
	KindNoResponders: "no responders",
	KindTimeout:      "timed out",
	KindDenied:       "refused by the bus",
	KindRefused:      "credential refused",
	KindNoSuchTool:   "no such tool",
}

// Error is the kind's short name: a Kind is a sentinel error.
func (k Kind) Error() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind %d", int(k))
}

// String is the kind's short name, as a log line carries it.
func (k Kind) String() string { return k.Error() }

// Exit is the exit status cmd/mesh ends with on a failure of this kind.
func (k Kind) Exit() int { return int(k) }

// Error is a failure of the client: its kind, a message for a person
// (naming what was wrong), and the cause it wraps (the SDK's error, or the
// parser's), which errors.Is and errors.As reach.
type Error struct {
	// Kind is what the failure was.
	Kind Kind
	// Tool is the tool called, "<module>.<tool>", when the failure is a
	// call's.
	Tool string
	msg  string
	err  error
}

// Error is the message for a person: what happened, to which tool.
func (e *Error) Error() string { return e.msg }

// Unwrap gives errors.Is and errors.As the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.err}
}

// failure is an *Error of kind k about tool (may be empty), with cause
// err (may be nil).
func failure(k Kind, tool string, err error, format string, args ...any) *Error {
	return &Error{Kind: k, Tool: tool, msg: fmt.Sprintf(format, args...), err: err}
}

// KindOf is the kind of err: 0 for nil, KindFailed for an error of no
// kind.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	return KindFailed
}

// Exit is the exit status for err: 0 for nil, else its kind's.
func Exit(err error) int { return int(KindOf(err)) }
