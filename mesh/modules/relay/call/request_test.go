package call

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseFillsTheDefaults(t *testing.T) {
	r, err := Parse([]byte(`{"module": "sensor", "tool": "calibrate"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Module: "sensor", Tool: "calibrate", Args: json.RawMessage(`{}`), Times: 1, TimeoutMS: 5000}
	if r.Module != want.Module || r.Tool != want.Tool || string(r.Args) != string(want.Args) || r.Times != want.Times || r.TimeoutMS != want.TimeoutMS {
		t.Fatalf("expected %+v, got %+v", want, r)
	}
	if r.Timeout() != 5*time.Second || r.Budget() != 5*time.Second {
		t.Fatalf("expected a 5s timeout and budget, got %v and %v", r.Timeout(), r.Budget())
	}
}

func TestParseKeepsWhatIsGiven(t *testing.T) {
	r, err := Parse([]byte(`{"module": "sensor", "tool": "calibrate", "args": {"to": 2}, "times": 200, "timeout_ms": 60000}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Args) != `{"to": 2}` || r.Times != 200 || r.TimeoutMS != 60000 {
		t.Fatalf("expected the request as given, got %+v", r)
	}
	if r.Budget() != 200*time.Minute {
		t.Fatalf("expected a budget of 200 calls of a minute, got %v", r.Budget())
	}
	r, err = Parse([]byte(`{"module": "m", "tool": "t", "args": null, "times": null, "timeout_ms": null}`))
	if err != nil || string(r.Args) != `{}` || r.Times != 1 || r.TimeoutMS != 5000 {
		t.Fatalf("expected null optional fields to be the defaults, got %+v, %v", r, err)
	}
}

// TestRequestRoundTrips checks that a request a step makes in Go reads
// back as the relay reads it, zero fields being the defaults.
func TestRequestRoundTrips(t *testing.T) {
	data, err := json.Marshal(Request{Module: "sensor", Tool: "calibrate"})
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"module":"sensor","tool":"calibrate"}` {
		t.Fatalf("expected the defaults left out, got %s", data)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("expected it accepted, got %v", err)
	}
}

func TestParseNamesTheField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[]`, `want a JSON object {"module": ..., "tool": ...}, got an array`},
		{`{"module": "s"`, `got not JSON`},
		{`null`, `got null`},
		{`{"tool": "t"}`, `field "module" is missing`},
		{`{"module": "s"}`, `field "tool" is missing`},
		{`{"module": "", "tool": "t"}`, `field "module" is empty`},
		{`{"module": "s", "tool": ""}`, `field "tool" is empty`},
		{`{"module": 5, "tool": "t"}`, `field "module": want a string, got a number`},
		{`{"module": "s", "tool": ["t"]}`, `field "tool": want a string, got an array`},
		{`{"module": "s", "tool": "t", "arg": {}}`, `field "arg" is not one of [module tool args times timeout_ms]`},
		{`{"module": "s", "tool": "t", "args": [1]}`, `field "args": want a JSON object, got an array`},
		{`{"module": "s", "tool": "t", "args": "x"}`, `field "args": want a JSON object, got a string`},
		{`{"module": "s", "tool": "t", "times": 0}`, `field "times": want an integer from 1 to 1000, got 0`},
		{`{"module": "s", "tool": "t", "times": 1001}`, `field "times": want an integer from 1 to 1000, got 1001`},
		{`{"module": "s", "tool": "t", "times": -1}`, `field "times": want an integer from 1 to 1000, got -1`},
		{`{"module": "s", "tool": "t", "times": 1.5}`, `field "times": want an integer from 1 to 1000, got 1.5`},
		{`{"module": "s", "tool": "t", "times": 1e2}`, `field "times": want an integer from 1 to 1000, got 1e2`},
		{`{"module": "s", "tool": "t", "times": "2"}`, `field "times": want an integer from 1 to 1000, got a string`},
		{`{"module": "s", "tool": "t", "timeout_ms": 0}`, `field "timeout_ms": want an integer from 1 to 60000, got 0`},
		{`{"module": "s", "tool": "t", "timeout_ms": 60001}`, `field "timeout_ms": want an integer from 1 to 60000, got 60001`},
		{`{"module": "s", "tool": "t", "timeout_ms": 99999999999999999999}`, `field "timeout_ms": want an integer from 1 to 60000, got 99999999999999999999`},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: expected a refusal, got none", tc.in)
			continue
		}
		if !errors.Is(err, ErrRequest) {
			t.Errorf("%s: expected ErrRequest, got %v", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: expected %q in the error, got %q", tc.in, tc.want, err)
		}
	}
}

func TestValidateTakesZeroForTheDefault(t *testing.T) {
	ok := []Request{
		{Module: "m", Tool: "t"},
		{Module: "m", Tool: "t", Args: json.RawMessage(`{"a":1}`), Times: MaxTimes, TimeoutMS: 60000},
	}
	for _, r := range ok {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: expected it valid, got %v", r, err)
		}
	}
	bad := map[string]Request{
		`field "module" is empty`: {Tool: "t"},
		`field "tool" is empty`:   {Module: "m"},
		`field "args"`:            {Module: "m", Tool: "t", Args: json.RawMessage(`[`)},
		`field "times"`:           {Module: "m", Tool: "t", Times: MaxTimes + 1},
		`field "timeout_ms"`:      {Module: "m", Tool: "t", TimeoutMS: -5},
	}
	for want, r := range bad {
		if err := r.Validate(); err == nil || !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: expected ErrRequest naming %s, got %v", r, want, err)
		}
	}
}
