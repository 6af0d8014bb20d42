package printable

import (
	"encoding/json"
	"testing"
)

// What a principal may put in a field an operator's terminal shows: each
// must come out inert (issue 18: mesh-controller status, mesh call and
// mesh tools printed other principals' bytes raw).
var hostile = map[string]string{
	"clear screen":         "\x1b[2J\x1b[H",
	"window title":         "\x1b]0;pwned\x07",
	"OSC 52 clipboard":     "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\",
	"C1 CSI":               "\u009b2J",
	"DEL":                  "a\x7fb",
	"NUL and BEL":          "\x00\x07",
	"carriage return":      "ok\rFORGED",
	"newline":              "one\ntwo",
	"bidi override":        "abc\u202edcba",
	"bidi isolate":         "\u2066x\u2069",
	"Arabic letter mark":   "\u061c",
	"line separator":       "a\u2028b",
	"invalid UTF-8":        "a\xffb\xc3",
	"an overlong encoding": "\xc0\xaf",
}

func TestLineLeavesNothingATerminalActsOn(t *testing.T) {
	want := map[string]string{
		"clear screen":         `\x1b[2J\x1b[H`,
		"window title":         `\x1b]0;pwned\x07`,
		"OSC 52 clipboard":     `\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\`,
		"C1 CSI":               `\u009b2J`,
		"DEL":                  `a\x7fb`,
		"NUL and BEL":          `\x00\x07`,
		"carriage return":      `ok\rFORGED`,
		"newline":              `one\ntwo`,
		"bidi override":        `abc\u202edcba`,
		"bidi isolate":         `\u2066x\u2069`,
		"Arabic letter mark":   `\u061c`,
		"line separator":       `a\u2028b`,
		"invalid UTF-8":        `a\xffb\xc3`,
		"an overlong encoding": `\xc0\xaf`,
	}
	for name, in := range hostile {
		if got := Line(in); got != want[name] {
			t.Errorf("%s: Line(%q) = %q, want %q", name, in, got, want[name])
		}
	}
}

func TestReadableTextIsKept(t *testing.T) {
	for _, s := range []string{
		"sensor 1.4.2", "refused: revision 2 is not after 2", `C:\path\to`, "Grüße, 東京, ½ °C",
		"emoji 👩‍💻 with a joiner", "tab\tkept? no", "",
	} {
		want := s
		if s == "tab\tkept? no" {
			want = `tab\tkept? no`
		}
		if got := Line(s); got != want {
			t.Errorf("Line(%q) = %q, want %q", s, got, want)
		}
	}
	if got := Block([]byte("line one\n\tindented\nline three\n")); got != "line one\n\tindented\nline three\n" {
		t.Errorf("Block kept %q", got)
	}
	if got := Block([]byte("a\r\n\x1b[31mred\n")); got != `a\r`+"\n"+`\x1b[31mred`+"\n" {
		t.Errorf("Block escaped %q", got)
	}
}

func TestJSONStaysValidAndMeansTheSame(t *testing.T) {
	for _, in := range []string{
		`{"a":"x\u001b[2Jy"}`,
		"{\"a\":\"x\u202ey\u009bz\x7f\"}",
		"{\"title\":\"\u2066t\u2069\",\"n\":[1,2.5,true,null]}",
		"{\r\n  \"a\": \"b\"\r\n}",
		`"plain"`,
		`{"esc":"\\u001b is text"}`,
		"{\"bad\":\"a\xffb\"}",
	} {
		out := JSON([]byte(in))
		if !json.Valid(out) {
			t.Errorf("JSON(%q) = %q: not valid JSON", in, out)
			continue
		}
		var a, b any
		_ = json.Unmarshal([]byte(in), &a)
		_ = json.Unmarshal(out, &b)
		if ja, jb := mustMarshal(t, a), mustMarshal(t, b); ja != jb {
			t.Errorf("JSON(%q) = %q: means %s, not %s", in, out, jb, ja)
		}
		for _, c := range out {
			if c < 0x20 && c != '\n' || c == 0x7f {
				t.Errorf("JSON(%q) = %q: holds control byte %#x", in, out, c)
			}
		}
		if Line(string(out)) != string(out) && !containsNewline(out) {
			t.Errorf("JSON(%q) = %q: Line would still escape something in it", in, out)
		}
	}
	// What is not JSON is not JSON's to keep: escaped as a block.
	if got := string(JSON([]byte("not \x1b[2J json"))); got != `not \x1b[2J json` {
		t.Errorf("JSON of not JSON = %q", got)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func containsNewline(b []byte) bool {
	for _, c := range b {
		if c == '\n' {
			return true
		}
	}
	return false
}
