package wire

import (
	"encoding/json"
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
	// ErrBadHeader means a header is present with a value the envelope
	// does not allow: malformed, over its limit, repeated, or spelled in
	// another case beside the envelope's own.
	ErrBadHeader = errors.New("invalid header")
	// ErrNotEnvelope means a message carries no envelope at all: a
	// server's status message, or a reply (a PubAck, an API answer) that
	// someone aimed at an event subject, or anything else that is not an
	// event. A reader refuses it; it is never content.
	ErrNotEnvelope = errors.New("not an event's envelope")
	// ErrHeadersTooLarge means the headers together exceed MaxHeaderBytes.
	ErrHeadersTooLarge = errors.New("headers too large")
	// ErrSourceMismatch means x-source names another module than the one
	// whose subject the event arrived on.
	ErrSourceMismatch = errors.New("x-source disagrees with the subject")
	// ErrBadBody means an event's body is not JSON.
	ErrBadBody = errors.New("the body is not JSON")
)

// Limits of the envelope. Design 19 names the headers and leaves their
// sizes open; these are the mesh's, the same for every implementation and
// every bus, so that what one reader accepts every other does too. A value
// over its limit is refused, never cut: a cut id would be another event.
const (
	// MaxIDBytes bounds x-event-id and x-causation-id. A UUID is 36 bytes;
	// 128 leaves an emitter room for a scheme of its own and bounds what a
	// consumer's memory of handled events holds per event.
	MaxIDBytes = 128
	// MaxTimeBytes bounds x-time: RFC 3339 with nine fractional digits and
	// an offset is 35 bytes.
	MaxTimeBytes = 64
	// MaxSchemaBytes bounds x-schema, a version of the body's shape.
	MaxSchemaBytes = 64
	// MaxContentTypeBytes bounds content-type: application/json and a
	// parameter or two.
	MaxContentTypeBytes = 128
	// MaxHeaderValueBytes bounds the value of any header, one the envelope
	// does not know among them: an unknown header is ignored, not unbounded.
	MaxHeaderValueBytes = 4096
	// MaxHeaderBytes bounds an event's headers together, each counted as
	// NATS writes it: name, ": ", value, CRLF.
	MaxHeaderBytes = 16384
)

// HeaderNATSStatus is the header nats.go reads a message's status line
// into (NATS/1.0 100 Idle Heartbeat, 404 No Messages, 408 Request
// Timeout, 409 …). Only the server writes status lines, and never on an
// event: one found on a subject of EVENTS is a status reply someone aimed
// there, and a reader refuses it on either bus.
const HeaderNATSStatus = "Status"

// HeaderNATSDescription is the header nats.go reads a status line's
// description into ("No Messages" of a 404).
const HeaderNATSDescription = "Description"

// HeaderError refuses one header of an envelope and names it, so that a
// refusal can be logged and reported with the header's name.
type HeaderError struct {
	// Header is the header's name, e.g. "x-time".
	Header string
	// Err is ErrMissingHeader, ErrBadHeader or ErrSourceMismatch.
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

// Unwrap lets errors.Is find the sentinel.
func (e *HeaderError) Unwrap() error { return e.Err }

// headerRule is what one envelope header's value must be.
type headerRule struct {
	max   int
	check func(string) error
}

// headerRules are the envelope's headers and their values' rules.
var headerRules = map[string]headerRule{
	HeaderEventID:     {MaxIDBytes, visibleASCII},
	HeaderSource:      {32, CheckName},
	HeaderNode:        {32, CheckName},
	HeaderTime:        {MaxTimeBytes, checkTime},
	HeaderContentType: {MaxContentTypeBytes, checkContentType},
	HeaderCausationID: {MaxIDBytes, visibleASCII},
	HeaderSchema:      {MaxSchemaBytes, visibleASCII},
}

// ValidateHeaders checks an event's headers, in this order: the message is
// an envelope at all (no status line, at least one envelope header), the
// headers are within MaxHeaderBytes and every value within
// MaxHeaderValueBytes, every required header is present and non-empty
// (the first missing one, in wire order, is named), and every envelope
// header present has one value, within its limit and of its form:
// x-event-id and x-causation-id 1–MaxIDBytes of visible ASCII, x-source
// and x-node names (CheckName), x-time RFC 3339, content-type
// application/json, x-schema 1–MaxSchemaBytes of visible ASCII. An
// envelope header spelled in another case beside it (X-Source and
// x-source) is refused: two readers could take different ones. Any other
// header, an unknown x- header among them, is accepted and ignored:
// refusing one would make adding a header a breaking change for every
// observer (design 19, "The envelope"). h is a nats.Header, or an AMQP
// message's headers converted to the same shape. Names are matched
// exactly, as nats.go matches them: the envelope's names are lower-case.
func ValidateHeaders(h map[string][]string) error {
	if _, ok := h[HeaderNATSStatus]; ok {
		return fmt.Errorf("%w: a status message (%s %s)", ErrNotEnvelope, HeaderNATSStatus, clip(HeaderValue(h, HeaderNATSStatus)))
	}
	if !hasEnvelopeHeader(h) {
		return fmt.Errorf("%w: no envelope header (a reply such as a PubAck aimed at an event subject, or no event at all)", ErrNotEnvelope)
	}
	total := 0
	for name, vs := range h {
		for _, v := range vs {
			if len(v) > MaxHeaderValueBytes {
				return &HeaderError{Header: clipName(name), Err: ErrBadHeader,
					Detail: fmt.Sprintf("%d bytes, over the limit of %d", len(v), MaxHeaderValueBytes)}
			}
			total += len(name) + len(v) + 4
		}
	}
	if total > MaxHeaderBytes {
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrHeadersTooLarge, total, MaxHeaderBytes)
	}
	for _, name := range RequiredHeaders {
		if HeaderValue(h, name) == "" {
			return &HeaderError{Header: name, Err: ErrMissingHeader}
		}
	}
	for _, name := range envelopeHeaders {
		vs, ok := h[name]
		if !ok {
			continue
		}
		if len(vs) > 1 {
			return &HeaderError{Header: name, Err: ErrBadHeader, Detail: fmt.Sprintf("%d values; the envelope has one", len(vs))}
		}
		if len(vs) == 0 || vs[0] == "" {
			continue // an optional header left empty reads as absent
		}
		rule := headerRules[name]
		if len(vs[0]) > rule.max {
			return &HeaderError{Header: name, Err: ErrBadHeader, Detail: fmt.Sprintf("%d bytes, over the limit of %d", len(vs[0]), rule.max)}
		}
		if err := rule.check(vs[0]); err != nil {
			return &HeaderError{Header: name, Err: ErrBadHeader, Detail: fmt.Sprintf("%s: %v", clip(vs[0]), err)}
		}
	}
	for name := range h {
		if lower := strings.ToLower(name); lower != name {
			if _, ok := headerRules[lower]; ok {
				return &HeaderError{Header: clipName(name), Err: ErrBadHeader,
					Detail: fmt.Sprintf("%s in another case: a reader that folds case could take it for the envelope's", lower)}
			}
		}
	}
	return nil
}

// ValidateEvent checks a delivered event whole, before anything acts on
// it: its headers (ValidateHeaders), its source and its body. source is
// the module that the subject the event arrived on names (EventOf; on
// AMQP the routing key, EventKeyFromRoutingKey). The bus lets only that
// module publish there, so that is who sent it, and an x-source naming
// anyone else is a module claiming to be another: design 19 says x-source
// cannot disagree with where the message arrived from, and this is where
// a reader makes it so. The body must be JSON: every emitter checks it
// before it publishes, so one that is not is a forgery or a stranger's
// message, never an event to hand on.
//
// An event of a seat (mesh.seat.<seat>.event.<verb>) has no module in its
// subject to check x-source against, and EventOf refuses its subject:
// until the mesh says who may publish there, a reader refuses it.
func ValidateEvent(source string, h map[string][]string, body []byte) error {
	if err := ValidateHeaders(h); err != nil {
		return err
	}
	if got := HeaderValue(h, HeaderSource); got != source {
		return &HeaderError{Header: HeaderSource, Err: ErrSourceMismatch,
			Detail: fmt.Sprintf("%s on a subject of %s", clip(got), clip(source))}
	}
	if !json.Valid(body) {
		return fmt.Errorf("%w: %d bytes", ErrBadBody, len(body))
	}
	return nil
}

// envelopeHeaders are the required and the optional headers, in wire order.
var envelopeHeaders = append(append([]string(nil), RequiredHeaders...), OptionalHeaders...)

func hasEnvelopeHeader(h map[string][]string) bool {
	for _, name := range envelopeHeaders {
		if _, ok := h[name]; ok {
			return true
		}
	}
	return false
}

// visibleASCII refuses what is empty or holds anything but printable
// ASCII without spaces: an id travels in logs, in Nats-Msg-Id and in the
// key of a consumer's memory, where a control character or a look-alike
// rune would be two ids that print the same.
func visibleASCII(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("byte %d is %#x; only visible ASCII is allowed", i, c)
		}
	}
	return nil
}

func checkTime(v string) error {
	if !validTime(v) {
		return errors.New("not RFC 3339")
	}
	return nil
}

func checkContentType(v string) error {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil || mt != ContentTypeJSON {
		return fmt.Errorf("not %s", ContentTypeJSON)
	}
	return nil
}

// clip quotes a value for an error message, cut to 64 bytes: a refusal
// names what it refused without echoing a sender's kilobytes.
func clip(v string) string {
	const max = 64
	if len(v) > max {
		return fmt.Sprintf("%q…", v[:max])
	}
	return fmt.Sprintf("%q", v)
}

// clipName is a header's name for an error, cut as clip cuts values.
func clipName(name string) string {
	if len(name) > 64 {
		return name[:64] + "…"
	}
	return name
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
// AMQP, the routing key <module>.<key>) and is never carried twice. The
// module must be a name and the key a key (CheckName, CheckKey), as on
// AMQP (EventKeyFromRoutingKey): a reader takes the module for the
// event's source, so nothing else may pass for one. A seat's event
// subject is refused with its own reason (ValidateEvent).
func EventKeyFromSubject(subject string) (module, key string, err error) {
	if strings.HasPrefix(subject, "mesh.seat.") {
		return "", "", fmt.Errorf("%w: %q is a seat's: its subject names a role, not the module whose x-source it must carry", ErrNotEventSubject, subject)
	}
	rest, ok := strings.CutPrefix(subject, "mesh.mod.")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrNotEventSubject, subject)
	}
	module, key, ok = strings.Cut(rest, ".event.")
	if !ok || CheckName(module) != nil || CheckKey(key) != nil {
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
