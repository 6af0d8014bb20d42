package call

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshbus/mesh/mesh/sdk"
)

func TestClassify(t *testing.T) {
	// Each error as the SDK's Request returns it: wrapped with the call.
	wrap := func(err error) error { return fmt.Errorf("call sensor.calibrate: %w", err) }
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{&sdk.ToolError{Module: "sensor", Tool: "calibrate", Message: "bad"}, ToolError},
		{fmt.Errorf("relayed: %w", &sdk.ToolError{Message: "bad"}), ToolError},
		{wrap(fmt.Errorf("%w: nats: permissions violation", sdk.ErrDenied)), Denied},
		{wrap(sdk.ErrNoResponders), NoResponders},
		{wrap(fmt.Errorf("%w: %w", sdk.ErrTimeout, context.DeadlineExceeded)), Timeout},
		{wrap(fmt.Errorf("%w: bad name", sdk.ErrInvalid)), Invalid},
		{wrap(sdk.ErrClosed), Failed},
		{wrap(ErrNotJSON), Failed},
		{errors.New("something else"), Failed},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%v: expected %s, got %s", tc.err, tc.want, got)
		}
	}
}

func TestParseOutcome(t *testing.T) {
	for _, o := range outcomes {
		if got, err := ParseOutcome(string(o)); err != nil || got != o {
			t.Errorf("%s: expected it read back, got %q, %v", o, got, err)
		}
	}
	if _, err := ParseOutcome("refused"); err == nil {
		t.Error(`expected "refused" refused as an outcome, got none`)
	}
}
