package call

import (
	"errors"
	"fmt"
	"slices"

	"github.com/meshbus/mesh/mesh/sdk"
)

// Outcome is what became of a request: of its first call that failed, or
// OK when every call was answered.
type Outcome string

// The outcomes, each the SDK's word for how a call ended.
const (
	// OK: every call was answered.
	OK Outcome = "ok"
	// ToolError: the tool's handler failed (*sdk.ToolError).
	ToolError Outcome = "tool_error"
	// Denied: the server refused the call, the relay's account having no
	// grant for the tool (sdk.ErrDenied).
	Denied Outcome = "denied"
	// NoResponders: nobody serves the tool (sdk.ErrNoResponders).
	NoResponders Outcome = "no_responders"
	// Timeout: no answer within the call's timeout (sdk.ErrTimeout).
	Timeout Outcome = "timeout"
	// Invalid: the SDK would not put the call on the wire: a module or
	// tool it cannot spell (sdk.ErrInvalid).
	Invalid Outcome = "invalid"
	// Failed: anything else — the connection closed, an answer that is
	// not JSON.
	Failed Outcome = "failed"
)

// outcomes are every Outcome, for ParseOutcome.
var outcomes = []Outcome{OK, ToolError, Denied, NoResponders, Timeout, Invalid, Failed}

// ParseOutcome reads an outcome's name, refusing one that is none, so
// that a step's misspelt expectation fails before anything runs.
func ParseOutcome(s string) (Outcome, error) {
	if o := Outcome(s); slices.Contains(outcomes, o) {
		return o, nil
	}
	return "", fmt.Errorf("call: %q is not an outcome (want one of %v)", s, outcomes)
}

// Classify names how a call that returned err ended; nil is OK. A tool's
// error is recognised first: its message is the handler's own, whatever
// it says.
func Classify(err error) Outcome {
	var te *sdk.ToolError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &te):
		return ToolError
	case errors.Is(err, sdk.ErrDenied):
		return Denied
	case errors.Is(err, sdk.ErrNoResponders):
		return NoResponders
	case errors.Is(err, sdk.ErrTimeout):
		return Timeout
	case errors.Is(err, sdk.ErrInvalid):
		return Invalid
	}
	return Failed
}
