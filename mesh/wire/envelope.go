package wire

import (
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
)

// The envelope's rules beyond its header names (headers.go): what makes a
// delivered event acceptable, how its time is written, where its key
// comes from, and how a tool's failure and a call nobody serves look on
// the wire. Every implementation of design 19 follows these, whatever
// its language or its bus.

// Sentinel errors of envelope validation.
var (
	// ErrMissingHeader means a required header is absent or empty.
	ErrMissingHeader = errors.New("missing required header")
	// ErrBadHeader means a required header is present with a value the
	// envelope does not allow.
	ErrBadHeader = errors.New("invalid header")
)

// HeaderError refuses one header of an envelope and names it, so that a
// refusal can be logged and reported with the header's name.
type HeaderError struct {
	// Header is the header's name, e.g. "x-time".
	Header string
	// Err is ErrMissingHeader or ErrBadHeader.
	Err error
	// Detail says what was wrong with a present value.
	Detail string
}

func (e *HeaderError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Header)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Header, e.Detail)
}

// Unwrap lets errors.Is find ErrMissingHeader or ErrBadHeader.
func (e *HeaderError) Unwrap() error { return e.Err }

// ValidateHeaders checks an event's headers: every required header is
// present and non-empty (the first missing one, in wire order, is
// named), x-time is RFC 3339 and content-type is application/json. Any
// other header, an unknown x- header among them, is accepted and ignored:
// refusing one would make adding a header a breaking change for every
// observer (design 19, "The envelope"). h is a nats.Header, or an AMQP
// message's headers converted to the same shape. Names are matched
// exactly, as nats.go matches them: the envelope's names are lower-case.
func ValidateHeaders(h map[string][]string) error {
	for _, name := range RequiredHeaders {
		if HeaderValue(h, name) == "" {
			return &HeaderError{Header: name, Err: ErrMissingHeader}
		}
	}
	if v := HeaderValue(h, HeaderTime); !validTime(v) {
		return &HeaderError{Header: HeaderTime, Err: ErrBadHeader, Detail: fmt.Sprintf("%q is not RFC 3339", v)}
	}
	mt, _, err := mime.ParseMediaType(HeaderValue(h, HeaderContentType))
	if err != nil || mt != ContentTypeJSON {
		return &HeaderError{Header: HeaderContentType, Err: ErrBadHeader,
			Detail: fmt.Sprintf("%q is not %s", HeaderValue(h, HeaderContentType), ContentTypeJSON)}
	}
	return nil
}

// HeaderValue is the first value of the header name in h, or "": how every
// reader of an envelope takes a header, whichever bus it came on.
func HeaderValue(h map[string][]string, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func validTime(v string) bool {
	_, err := time.Parse(time.RFC3339Nano, v)
	return err == nil
}

// TimeLayout is how an emitter writes x-time: RFC 3339 in UTC with exactly
// three fractional digits, the form JavaScript's Date.toISOString
// produces, so that two implementations emit the same bytes for the same
// instant. A reader accepts any RFC 3339 time.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t for the x-time header.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime reads an x-time header.
func ParseTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &HeaderError{Header: HeaderTime, Err: ErrBadHeader, Detail: fmt.Sprintf("%q is not RFC 3339", v)}
	}
	return t, nil
}

// ErrNotEventSubject means a subject is not a module's event subject.
var ErrNotEventSubject = errors.New("not a module event subject")

// EventKeyFromSubject recovers the emitting module and the event key from
// mesh.mod.<module>.event.<key>: the key travels in the subject (or, on
// AMQP, the routing key <module>.<key>) and is never carried twice.
func EventKeyFromSubject(subject string) (module, key string, err error) {
	rest, ok := strings.CutPrefix(subject, "mesh.mod.")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrNotEventSubject, subject)
	}
	module, key, ok = strings.Cut(rest, ".event.")
	if !ok || module == "" || key == "" || strings.Contains(module, ".") {
		return "", "", fmt.Errorf("%w: %q", ErrNotEventSubject, subject)
	}
	return module, key, nil
}

// A tool's reply. A successful call is answered with the result as the
// body and no header. A failing or panicking handler is answered with
// the header x-error carrying the error's message and an EMPTY body: the
// header alone decides failure, so a tool whose result happens to look
// like an error is never mistaken for one, and a reader ignores the body
// of a failed reply. The message is one line: CR and LF become spaces,
// since a header value cannot hold them, and an empty message becomes
// ToolFailedMessage, so the header is never empty.
const (
	// HeaderToolError marks a failed tool call and carries its message.
	HeaderToolError = "x-error"
	// ToolFailedMessage stands in for a failure without a message.
	ToolFailedMessage = "tool failed"
)

// ToolErrorHeaders are the reply headers of a failed tool call.
func ToolErrorHeaders(message string) map[string][]string {
	msg := strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(message))
	if msg == "" {
		msg = ToolFailedMessage
	}
	return map[string][]string{HeaderToolError: {msg}}
}

// ToolFailure reads a tool reply's headers: the message and true when the
// call failed, "" and false when the body is the result.
func ToolFailure(h map[string][]string) (message string, failed bool) {
	v, ok := h[HeaderToolError]
	if !ok {
		return "", false
	}
	if len(v) == 0 || v[0] == "" {
		return ToolFailedMessage, true
	}
	return v[0], true
}

// No responders: a call to a tool that nobody serves is answered by the
// bus itself, never by a timeout. On NATS the server replies with a
// status-only message (header line "NATS/1.0 503", nats.go's
// ErrNoResponders). On AMQP the mesh declares every service queue, so a
// call is always routable: the caller first checks the queue passively
// for consumers and, with none, sends the call as a probe that expires at
// once; a confirmed probe, or a mandatory publish returned with reply
// code 312 (NO_ROUTE) because the queue is gone, is no responders.
const (
	// NoRespondersNATS is the status of the server's no-responders reply.
	NoRespondersNATS = 503
	// NoRespondersAMQP is the basic.return reply code of an unroutable call.
	NoRespondersAMQP = 312
)
