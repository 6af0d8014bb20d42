// Package calibrate is the sensor's tool: calibrate sets the offset the
// sensor applies to its readings and answers the offset now in force. It
// lives apart from the command so that the tool's contract — its
// arguments, its answer, its refusals — is tested without a bus, and so
// that another module's tests serve exactly the tool the sensor serves.
package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Tool is the tool's name.
const Tool = "calibrate"

// Args are the tool's arguments, as the manifest's schema says:
// {"to": <number>} and nothing else.
type Args struct {
	// To is the offset, in the reading's unit.
	To float64 `json:"to"`
}

// Answer is what a call answers.
type Answer struct {
	// Offset is the offset now in force.
	Offset float64 `json:"offset"`
}

// ErrArgs is the cause of every refusal of a call's arguments; the
// message that wraps it names what was wrong. It reaches the caller as the
// message of its *sdk.ToolError.
var ErrArgs = errors.New(`calibrate: want {"to": <number>}`)

// maxQuoted bounds how much of the caller's own text a refusal repeats:
// the message travels back in a header.
const maxQuoted = 64

// ParseArgs reads a call's arguments, refusing what the schema refuses:
// anything but a JSON object, a field other than "to", "to" missing or
// not a number (or a number no float64 holds).
func ParseArgs(data []byte) (Args, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		switch k := kind(data); {
		case len(bytes.TrimSpace(data)) == 0:
			return Args{}, fmt.Errorf("%w: the arguments are empty", ErrArgs)
		case k == notJSON:
			return Args{}, fmt.Errorf("%w: the arguments are not JSON", ErrArgs)
		default:
			return Args{}, fmt.Errorf("%w: the arguments are %s, not an object", ErrArgs, k)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if name != "to" {
			return Args{}, fmt.Errorf(`%w: field %q is not allowed (the only field is "to")`, ErrArgs, quote(name))
		}
	}
	raw, ok := fields["to"]
	if !ok {
		return Args{}, fmt.Errorf(`%w: field "to" is missing`, ErrArgs)
	}
	if k := kind(raw); k != "a number" {
		return Args{}, fmt.Errorf(`%w: field "to" is %s, not a number`, ErrArgs, k)
	}
	var a Args
	if err := json.Unmarshal(raw, &a.To); err != nil {
		return Args{}, fmt.Errorf(`%w: field "to": %s is out of range`, ErrArgs, quote(string(raw)))
	}
	return a, nil
}

// kind names the kind of a JSON value for a message: "an object", "an
// array", "a string", "a number", "a boolean", "null", or notJSON.
func kind(raw []byte) string {
	if !json.Valid(raw) {
		return notJSON
	}
	// Valid JSON: its first byte tells its kind, even for a number no
	// float64 holds.
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

const notJSON = "not JSON"

func quote(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "…"
}

// Sensor holds the offset in memory: a restart forgets it, as a sample
// may. The zero Sensor has offset 0. It is safe for concurrent use.
type Sensor struct {
	mu     sync.Mutex
	offset float64
}

// Offset is the offset now in force.
func (s *Sensor) Offset() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset
}

// Calibrate is the tool's handler (an sdk.ToolHandler): it sets the
// offset and answers it; arguments ParseArgs refuses are its error, and
// leave the offset as it was.
func (s *Sensor) Calibrate(_ context.Context, args []byte) ([]byte, error) {
	a, err := ParseArgs(args)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.offset = a.To
	s.mu.Unlock()
	out, err := json.Marshal(Answer{Offset: a.To})
	if err != nil {
		return nil, fmt.Errorf("calibrate: encode answer: %w", err)
	}
	return out, nil
}
