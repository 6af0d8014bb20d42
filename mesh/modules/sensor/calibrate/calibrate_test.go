package calibrate

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseArgsAcceptsTheSchema(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{`{"to": 2.5}`, 2.5},
		{`{"to":-3}`, -3},
		{` {"to": 0} `, 0},
		{`{"to": 1e3}`, 1000},
	} {
		got, err := ParseArgs([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: expected it accepted, got %v", tc.in, err)
			continue
		}
		if got.To != tc.want {
			t.Errorf("%s: expected to=%v, got %v", tc.in, tc.want, got.To)
		}
	}
}

func TestParseArgsNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `calibrate: want {"to": <number>}: field "to" is missing`},
		{`{"to": "high"}`, `field "to" is a string, not a number`},
		{`{"to": null}`, `field "to" is null, not a number`},
		{`{"to": true}`, `field "to" is a boolean, not a number`},
		{`{"to": [1]}`, `field "to" is an array, not a number`},
		{`{"to": {"v": 1}}`, `field "to" is an object, not a number`},
		{`{"to": 1e400}`, `field "to": 1e400 is out of range`},
		{`{"to": 1, "by": 2}`, `field "by" is not allowed (the only field is "to")`},
		{`{"too": 1}`, `field "too" is not allowed`},
		{`[1]`, `the arguments are an array, not an object`},
		{`5`, `the arguments are a number, not an object`},
		{`null`, `the arguments are null, not an object`},
		{`{"to": 1`, `the arguments are not JSON`},
		{`{"to": 1} {}`, `the arguments are not JSON`},
		{``, `the arguments are empty`},
		{`{"` + strings.Repeat("x", 200) + `": 1}`, `field "` + strings.Repeat("x", 64) + `…" is not allowed`},
	} {
		_, err := ParseArgs([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: expected a refusal, got none", tc.in)
			continue
		}
		if !errors.Is(err, ErrArgs) {
			t.Errorf("%s: expected ErrArgs, got %v", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: expected %q in the error, got %q", tc.in, tc.want, err)
		}
	}
}

func TestCalibrateKeepsTheOffset(t *testing.T) {
	var s Sensor
	out, err := s.Calibrate(context.Background(), []byte(`{"to": 1.25}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"offset":1.25}` {
		t.Fatalf(`expected {"offset":1.25}, got %s`, out)
	}
	if _, err := s.Calibrate(context.Background(), []byte(`{"to": "x"}`)); err == nil {
		t.Fatal("expected bad arguments refused, got none")
	}
	if got := s.Offset(); got != 1.25 {
		t.Fatalf("expected a refused call to leave the offset at 1.25, got %v", got)
	}
}
