package call

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/sdk"
)

// fake answers with n in {"n": n} for each call, failing the fail-th call
// (from 1; 0 never) with err.
type fake struct {
	calls     int
	fail      int
	err       error
	deadlines []time.Duration
	args      []string
}

func (f *fake) call(ctx context.Context, module, tool string, args []byte) ([]byte, error) {
	f.calls++
	if d, ok := ctx.Deadline(); ok {
		f.deadlines = append(f.deadlines, time.Until(d))
	}
	f.args = append(f.args, module+"."+tool+" "+string(args))
	if f.calls == f.fail {
		return nil, f.err
	}
	return fmt.Appendf(nil, `{"n":%d}`, f.calls), nil
}

func TestMakeAnswersTheLastAnswer(t *testing.T) {
	f := &fake{}
	a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate", Times: 3, TimeoutMS: 2000}, f.call)
	if a.Outcome != OK || a.Error != "" || a.Calls != 3 || string(a.Answer) != `{"n":3}` {
		t.Fatalf(`expected ok after 3 calls answering {"n":3}, got %+v`, a)
	}
	if f.args[0] != "sensor.calibrate {}" {
		t.Fatalf("expected the default arguments {}, got %s", f.args[0])
	}
	for _, d := range f.deadlines {
		if d <= 0 || d > 2*time.Second {
			t.Fatalf("expected each call bounded by its 2s timeout, got %v left", d)
		}
	}
	if len(f.deadlines) != 3 {
		t.Fatalf("expected every call to have a deadline, got %d of 3", len(f.deadlines))
	}
	if l := a.Latency; l.MedianUS > l.P99US || l.P99US > l.MaxUS {
		t.Fatalf("expected median <= p99 <= max, got %+v", l)
	}
}

func TestMakeStopsAtTheFirstFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{&sdk.ToolError{Module: "sensor", Tool: "calibrate", Message: "calibrate: no"}, ToolError},
		{fmt.Errorf("call sensor.calibrate: %w", sdk.ErrDenied), Denied},
		{fmt.Errorf("call sensor.calibrate: %w", sdk.ErrNoResponders), NoResponders},
		{fmt.Errorf("call sensor.calibrate: %w", sdk.ErrTimeout), Timeout},
		{fmt.Errorf("call sensor.calibrate: %w", sdk.ErrInvalid), Invalid},
		{errors.New("connection closed"), Failed},
	} {
		f := &fake{fail: 3, err: tc.err}
		a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate", Times: 10}, f.call)
		if a.Outcome != tc.want || a.Calls != 3 || f.calls != 3 {
			t.Errorf("%v: expected %s after 3 calls, got %s after %d (%d made)", tc.err, tc.want, a.Outcome, a.Calls, f.calls)
		}
		if a.Error != tc.err.Error() {
			t.Errorf("%v: expected the error's text, got %q", tc.err, a.Error)
		}
		if a.Answer != nil {
			t.Errorf("%v: expected no answer when not ok, got %s", tc.err, a.Answer)
		}
	}
}

func TestMakeFirstCallFailing(t *testing.T) {
	f := &fake{fail: 1, err: fmt.Errorf("call sensor.calibrate: %w", sdk.ErrDenied)}
	a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate"}, f.call)
	if a.Outcome != Denied || a.Calls != 1 || a.Latency != (Latency{}) {
		t.Fatalf("expected denied after 1 call with no latency, got %+v", a)
	}
}

func TestMakeTimesOutEachCall(t *testing.T) {
	wait := func(ctx context.Context, _, _ string, _ []byte) ([]byte, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %w", sdk.ErrTimeout, ctx.Err())
	}
	start := time.Now()
	a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate", Times: 5, TimeoutMS: 20}, wait)
	if a.Outcome != Timeout || a.Calls != 1 {
		t.Fatalf("expected timeout after 1 call, got %+v", a)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("expected the call's 20ms timeout to end it, took %v", took)
	}
}

func TestMakeRefusesAnAnswerThatIsNotJSON(t *testing.T) {
	raw := func(context.Context, string, string, []byte) ([]byte, error) { return []byte("not json"), nil }
	a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate"}, raw)
	if a.Outcome != Failed || !strings.Contains(a.Error, ErrNotJSON.Error()) || a.Calls != 1 {
		t.Fatalf("expected failed with %q after 1 call, got %+v", ErrNotJSON, a)
	}
}

func TestMakeInvalidRequestMakesNoCall(t *testing.T) {
	f := &fake{}
	a := Make(context.Background(), Request{Module: "sensor", Tool: "calibrate", Times: -1}, f.call)
	if a.Outcome != Invalid || a.Calls != 0 || f.calls != 0 || !strings.Contains(a.Error, `field "times"`) {
		t.Fatalf("expected invalid with no call, naming times, got %+v (%d calls)", a, f.calls)
	}
}
