// Package printable makes text from other principals safe to show on an
// operator's terminal. A host's report, a build's error, a tool's answer
// or description are bytes someone else chose; printed raw, they can
// clear the screen, set the window title, write the clipboard (OSC 52),
// or reorder what is read (bidi overrides) — issue 18. What a terminal
// would act on is escaped in Go's notation (\x1b, \u202e); valid UTF-8
// text that is only text stays as it is, readable. A backslash is not
// escaped: the escapes are for a person to read, not to be decoded.
package printable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line is s fit for one line: every control character (C0, DEL, C1: the
// introducers of every escape sequence), newline and tab among them,
// every bidi control, the line and paragraph separators and every byte
// that is not valid UTF-8, escaped.
func Line(s string) string { return escape(s, false) }

// Block is b as text of several lines: as Line, but a newline and a tab
// are kept.
func Block(b []byte) string { return escape(string(b), true) }

// JSON is b, when it is valid JSON, with what a terminal would act on
// escaped as JSON's \u escapes inside its strings (a byte that is not
// UTF-8 as \ufffd, what a decoder reads it as), so that it stays valid
// JSON meaning the same; a carriage return between tokens is
// dropped (whitespace there means nothing). What is not valid JSON is
// escaped as Block.
func JSON(b []byte) []byte {
	if !json.Valid(b) {
		return []byte(Block(b))
	}
	var out bytes.Buffer
	out.Grow(len(b))
	inString := false
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case !inString && r == '\r':
		case !inString:
			out.WriteRune(r)
			if r == '"' {
				inString = true
			}
		case r == '\\':
			// An escape is copied whole: \" must not end the string.
			out.Write(b[i : i+2])
			n = 2
		case r == '"':
			out.WriteByte('"')
			inString = false
		case r == utf8.RuneError && n <= 1:
			// Not UTF-8 (json.Valid lets it through): what a decoder
			// would read it as.
			out.WriteString(`\ufffd`)
		case acted(r):
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.Write(b[i : i+n])
		}
		i += n
	}
	return out.Bytes()
}

// escape writes s with what a terminal acts on escaped; keepLines keeps
// newline and tab.
func escape(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || acted(r) && !(keepLines && (r == '\n' || r == '\t')) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&out, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			out.WriteRune(r)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r < 0x80 && acted(r):
			fmt.Fprintf(&out, `\x%02x`, r)
		case acted(r):
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteString(s[i : i+n])
		}
		i += n
	}
	return out.String()
}

// acted reports whether a terminal may act on r rather than show it:
// a control character (C0, DEL, C1), a bidi control, or a line or
// paragraph separator.
func acted(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}
