package call

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Tool is the relay's tool.
const Tool = "call"

// Bounds and defaults of a request.
const (
	// DefaultTimes is how many calls a request without times makes.
	DefaultTimes = 1
	// MaxTimes is the most calls one request makes.
	MaxTimes = 1000
	// DefaultTimeout bounds each call of a request without timeout_ms.
	DefaultTimeout = 5 * time.Second
	// MaxTimeout is the longest timeout_ms allowed, per call.
	MaxTimeout = 60 * time.Second
)

// ErrRequest is the cause of every refusal of a request; the message that
// wraps it names the field. The relay answers it as its tool's error.
var ErrRequest = errors.New("call: invalid request")

// Request asks the relay to call Module's Tool with Args, Times times one
// after another, each call bounded by TimeoutMS. A zero Args, Times or
// TimeoutMS is the default (omitted from the JSON): {}, 1 and 5000.
type Request struct {
	// Module is the module (or seat) whose tool is called.
	Module string `json:"module"`
	// Tool is the tool called.
	Tool string `json:"tool"`
	// Args are the call's arguments, a JSON object; default {}.
	Args json.RawMessage `json:"args,omitempty"`
	// Times is how many calls to make, 1 to MaxTimes; default 1.
	Times int `json:"times,omitempty"`
	// TimeoutMS bounds each call, in milliseconds, 1 to 60000; default
	// 5000.
	TimeoutMS int `json:"timeout_ms,omitempty"`
}

const maxTimeoutMS = int(MaxTimeout / time.Millisecond)

// fields are a request's fields, in the order a refusal lists them.
var fields = []string{"module", "tool", "args", "times", "timeout_ms"}

// maxQuoted bounds how much of the caller's own text a refusal repeats:
// the message travels back in a header.
const maxQuoted = 64

// Parse reads a request, refusing (with ErrRequest, naming the field)
// anything but a JSON object of the fields above with values of their
// kinds and in their bounds; a times or timeout_ms given as 0 is out of
// bounds, not the default, while an optional field given as null is
// absent. The request returned has its defaults filled in.
func Parse(data []byte) (Request, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return Request{}, fmt.Errorf(`%w: want a JSON object {"module": ..., "tool": ...}, got %s`, ErrRequest, kind(data))
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(fields, name) {
			return Request{}, fmt.Errorf("%w: field %q is not one of %v", ErrRequest, quote(name), fields)
		}
	}
	var r Request
	var err error
	if r.Module, err = text(raw, "module"); err != nil {
		return Request{}, err
	}
	if r.Tool, err = text(raw, "tool"); err != nil {
		return Request{}, err
	}
	if a, ok := raw["args"]; ok && kind(a) != "null" {
		r.Args = a
	}
	if r.Times, err = integer(raw, "times", 1, MaxTimes); err != nil {
		return Request{}, err
	}
	if r.TimeoutMS, err = integer(raw, "timeout_ms", 1, maxTimeoutMS); err != nil {
		return Request{}, err
	}
	if err := r.Validate(); err != nil {
		return Request{}, err
	}
	return r.filled(), nil
}

// Validate checks a request made in Go as Parse checks one read from
// JSON, a zero Args, Times or TimeoutMS being the default. Whether
// Module and Tool are names the mesh can spell is the SDK's to say, at
// the call: that is the outcome Invalid.
func (r Request) Validate() error {
	switch {
	case r.Module == "":
		return fmt.Errorf(`%w: field "module" is empty`, ErrRequest)
	case r.Tool == "":
		return fmt.Errorf(`%w: field "tool" is empty`, ErrRequest)
	case len(r.Args) > 0 && kind(r.Args) != "an object":
		return fmt.Errorf(`%w: field "args": want a JSON object, got %s`, ErrRequest, kind(r.Args))
	case r.Times < 0 || r.Times > MaxTimes:
		return fmt.Errorf(`%w: field "times": want an integer from 1 to %d, got %d`, ErrRequest, MaxTimes, r.Times)
	case r.TimeoutMS < 0 || r.TimeoutMS > maxTimeoutMS:
		return fmt.Errorf(`%w: field "timeout_ms": want an integer from 1 to %d, got %d`, ErrRequest, maxTimeoutMS, r.TimeoutMS)
	}
	return nil
}

// Timeout bounds each call of the request.
func (r Request) Timeout() time.Duration {
	if r.TimeoutMS == 0 {
		return DefaultTimeout
	}
	return time.Duration(r.TimeoutMS) * time.Millisecond
}

// Budget is the longest the relay may take to answer the request: every
// call taking its whole timeout. A caller of relay.call gives its own
// call at least this much, and a little more for the round trip.
func (r Request) Budget() time.Duration {
	return time.Duration(r.filled().Times) * r.Timeout()
}

// filled is r with its defaults written in.
func (r Request) filled() Request {
	if len(r.Args) == 0 {
		r.Args = json.RawMessage(`{}`)
	}
	if r.Times == 0 {
		r.Times = DefaultTimes
	}
	if r.TimeoutMS == 0 {
		r.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	return r
}

// text reads a required string field.
func text(raw map[string]json.RawMessage, name string) (string, error) {
	v, ok := raw[name]
	if !ok {
		return "", fmt.Errorf("%w: field %q is missing", ErrRequest, name)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%w: field %q: want a string, got %s", ErrRequest, name, kind(v))
	}
	return s, nil
}

// integer reads an optional integer field within [lo, hi]; 0 (the
// default) when absent or null.
func integer(raw map[string]json.RawMessage, name string, lo, hi int) (int, error) {
	v, ok := raw[name]
	if !ok || kind(v) == "null" {
		return 0, nil
	}
	bad := func(got string) error {
		return fmt.Errorf("%w: field %q: want an integer from %d to %d, got %s", ErrRequest, name, lo, hi, got)
	}
	if k := kind(v); k != "a number" {
		return 0, bad(k)
	}
	lit := string(bytes.TrimSpace(v))
	n, err := strconv.Atoi(lit)
	if err != nil || n < lo || n > hi {
		return 0, bad(quote(lit))
	}
	return n, nil
}

// kind names the kind of a JSON value for a message: "an object", "an
// array", "a string", "a number", "a boolean", "null", or "not JSON".
func kind(raw []byte) string {
	if !json.Valid(raw) {
		return "not JSON"
	}
	// Valid JSON: its first byte tells its kind.
	switch bytes.TrimSpace(raw)[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func quote(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "…"
}
