package wire

import (
	"errors"
	"strings"
)

// What a reader says when it refuses a delivery for good (docs/events.md).
// On NATS the refusal is a Term with a reason, and the server repeats the
// reason in its MSG_TERMINATED advisory (TerminatedAdvisories): the only
// account of the refusal anyone outside the module sees, so its form is
// the wire's and the same in every implementation.

// The parts of a delivery a refusal names, besides a header's name.
const (
	RefusedBody     = "body"     // the body is not JSON
	RefusedHeaders  = "headers"  // the headers together are over MaxHeaderBytes
	RefusedSubject  = "subject"  // not a module's event subject
	RefusedEnvelope = "envelope" // no envelope at all: a PubAck, an API answer, a status
)

// refusalPrefix opens every refusal's reason.
const refusalPrefix = "envelope refused: "

// RefusedPart names what of a delivery err refused: the header's name for
// a HeaderError, else RefusedBody, RefusedHeaders, RefusedSubject or, for
// anything else, RefusedEnvelope.
func RefusedPart(err error) string {
	var he *HeaderError
	switch {
	case errors.As(err, &he):
		return he.Header
	case errors.Is(err, ErrBadBody):
		return RefusedBody
	case errors.Is(err, ErrHeadersTooLarge):
		return RefusedHeaders
	case errors.Is(err, ErrNotEventSubject):
		return RefusedSubject
	}
	return RefusedEnvelope
}

// RefusalReason is the reason a reader terminates a delivery with:
// "envelope refused: PART: DETAIL", PART as RefusedPart names it. A
// header's name holds no ':' (a NATS header line is "name: value"), so
// the part reads back unambiguously (ParseRefusalReason).
func RefusalReason(err error) string {
	return refusalPrefix + RefusedPart(err) + ": " + err.Error()
}

// ParseRefusalReason reads the part a refusal's reason names; ok is false
// for a reason that is not a refusal's.
func ParseRefusalReason(reason string) (part string, ok bool) {
	rest, ok := strings.CutPrefix(reason, refusalPrefix)
	if !ok {
		return "", false
	}
	part, _, ok = strings.Cut(rest, ": ")
	if !ok || part == "" {
		return "", false
	}
	return part, true
}
