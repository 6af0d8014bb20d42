package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Answer is the relay's account of a request.
type Answer struct {
	// Outcome is how the request ended.
	Outcome Outcome `json:"outcome"`
	// Error is the failed call's error, as the SDK spelled it, when the
	// outcome is not OK.
	Error string `json:"error,omitempty"`
	// Answer is the last call's answer when the outcome is OK (absent if
	// the tool answered nothing).
	Answer json.RawMessage `json:"answer,omitempty"`
	// Calls is how many calls were made, the failed one included.
	Calls int `json:"calls"`
	// Latency is over the calls that succeeded.
	Latency Latency `json:"latency"`
}

// Caller calls module's tool with args: sdk.Module's Request.
type Caller func(ctx context.Context, module, tool string, args []byte) ([]byte, error)

// ErrNotJSON is a call answered with something that is not JSON: the
// relay's own answer is JSON and carries the tool's as it is, so it cannot
// carry that one. The outcome is Failed.
var ErrNotJSON = errors.New("the answer is not JSON")

// Make makes r's calls through c one after another, each bounded by r's
// timeout within ctx, and stops at the first that fails. An invalid r
// makes no call: it is the outcome Invalid.
func Make(ctx context.Context, r Request, c Caller) Answer {
	if err := r.Validate(); err != nil {
		return Answer{Outcome: Invalid, Error: err.Error()}
	}
	r = r.filled()
	var a Answer
	took := make([]time.Duration, 0, r.Times)
	for a.Calls < r.Times {
		out, d, err := once(ctx, r, c)
		a.Calls++
		if err != nil {
			a.Outcome, a.Error, a.Answer = Classify(err), err.Error(), nil
			break
		}
		took = append(took, d)
		a.Answer = out
	}
	if a.Outcome == "" {
		a.Outcome = OK
	}
	a.Latency = Summarize(took)
	return a
}

// once makes one call and measures it: the SDK's Request alone, not the
// answer's checking.
func once(ctx context.Context, r Request, c Caller) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout())
	defer cancel()
	start := time.Now()
	out, err := c(ctx, r.Module, r.Tool, r.Args)
	d := time.Since(start)
	if err != nil {
		return nil, d, err
	}
	if len(out) > 0 && !json.Valid(out) {
		return nil, d, fmt.Errorf("call %s.%s: %w (%d bytes)", r.Module, r.Tool, ErrNotJSON, len(out))
	}
	return out, d, nil
}
