// Package driverproto is the protocol between the conformance bed and an
// implementation's driver (docs/conformance.md): the commands and their
// flags, the JSON lines a driver prints, the error classes and the exit
// statuses. It is spelled here once; the harness reads lines with it, the
// Go driver parses its command line and prints with it, and the steps
// build commands with it. A driver in another language speaks the same
// protocol from the document.
package driverproto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Kind is a line's kind: the "kind" field every line carries.
type Kind string

// The kinds of line a driver prints, a closed set.
const (
	KindIdentity Kind = "identity"
	KindEmitted  Kind = "emitted"
	KindReady    Kind = "ready"
	KindHandled  Kind = "handled"
	KindServed   Kind = "served"
	KindResult   Kind = "result"
	KindGrant    Kind = "grant"
	KindDone     Kind = "done"
)

// Kinds lists every kind, in the order the document gives them.
var Kinds = []Kind{KindIdentity, KindEmitted, KindReady, KindHandled, KindServed, KindResult, KindGrant, KindDone}

// ErrProtocol is wrapped when a driver prints what the protocol does not
// say: a line that is not a JSON object, an unknown kind or field, a
// closing line missing or not last.
var ErrProtocol = errors.New("driver broke the protocol")

// Body is what one line says; each kind has its own type.
type Body interface{ Kind() Kind }

// Identity is what connect took from the credential, and the
// environment as the implementation left it after connecting.
type Identity struct {
	Node      string `json:"node"`
	Module    string `json:"module"`
	EnvNode   string `json:"env_node"`
	EnvModule string `json:"env_module"`
}

// Emitted is an event emit published, by the id the bus holds it under.
type Emitted struct {
	ID string `json:"id"`
}

// Ready says a consuming or serving driver is subscribed: what is
// published from now on reaches it.
type Ready struct{}

// Handled is one event a handler received.
type Handled struct {
	Event Event `json:"event"`
}

// Event is an event as a handler received it. Key is "<module>.<key>";
// Time is the x-time header as received; Body is the body's bytes as a
// JSON string, so that the bed compares them byte for byte; Causation and
// Schema are empty when absent.
type Event struct {
	ID        string `json:"id"`
	Source    string `json:"source"`
	Node      string `json:"node"`
	Key       string `json:"key"`
	Time      string `json:"time"`
	Causation string `json:"causation"`
	Schema    string `json:"schema"`
	Body      string `json:"body"`
}

// Served is one call a serving driver's handler received, with its
// arguments as text.
type Served struct {
	Tool string `json:"tool"`
	Args string `json:"args"`
}

// Result is a call's answer, its body as text.
type Result struct {
	Body string `json:"body"`
}

// Grant is one entry of a contributions file: the consumer it names.
type Grant struct {
	Module string `json:"module"`
	Node   string `json:"node"`
}

// Done closes every command's output: OK, or the class of what went
// wrong and its message.
type Done struct {
	OK      bool   `json:"ok"`
	Class   Class  `json:"class,omitempty"`
	Message string `json:"message,omitempty"`
}

// Kind is the line's kind.
func (Identity) Kind() Kind { return KindIdentity }

// Kind is the line's kind.
func (Emitted) Kind() Kind { return KindEmitted }

// Kind is the line's kind.
func (Ready) Kind() Kind { return KindReady }

// Kind is the line's kind.
func (Handled) Kind() Kind { return KindHandled }

// Kind is the line's kind.
func (Served) Kind() Kind { return KindServed }

// Kind is the line's kind.
func (Result) Kind() Kind { return KindResult }

// Kind is the line's kind.
func (Grant) Kind() Kind { return KindGrant }

// Kind is the line's kind.
func (Done) Kind() Kind { return KindDone }

// Failed is the closing line of a command that went wrong.
func Failed(c Class, message string) Done { return Done{Class: c, Message: message} }

// decoders read a line's fields (without "kind") into its kind's type,
// refusing a field the type does not have.
var decoders = map[Kind]func([]byte) (Body, error){
	KindIdentity: decode[Identity],
	KindEmitted:  decode[Emitted],
	KindReady:    decode[Ready],
	KindHandled:  decode[Handled],
	KindServed:   decode[Served],
	KindResult:   decode[Result],
	KindGrant:    decode[Grant],
	KindDone:     decodeDone,
}

func decode[T Body](fields []byte) (Body, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(fields))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func decodeDone(fields []byte) (Body, error) {
	b, err := decode[Done](fields)
	if err != nil {
		return nil, err
	}
	d := b.(Done)
	switch {
	case d.OK && (d.Class != "" || d.Message != ""):
		return nil, errors.New("a successful done carries no class or message")
	case !d.OK && !slices.Contains(Classes, d.Class):
		return nil, fmt.Errorf("a failed done's class %q is none of %v", d.Class, Classes)
	}
	return d, nil
}

// Marshal renders b as one line, without its newline: "kind" first, then
// b's fields.
func Marshal(b Body) ([]byte, error) {
	fields, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("marshal %s line: %w", b.Kind(), err)
	}
	kind, _ := json.Marshal(b.Kind())
	out := append([]byte(`{"kind":`), kind...)
	if len(fields) > 2 { // more than "{}"
		out = append(out, ',')
	}
	return append(out, fields[1:]...), nil
}

// Line is one line a driver printed.
type Line struct {
	// Body is what it says, of its kind's type.
	Body
	text string
}

// String is the line as printed.
func (l Line) String() string { return l.text }

// ParseLine reads one printed line, refusing anything the protocol does
// not say: a line that is not an object, an unknown kind, an unknown
// field, a failed done without a known class.
func ParseLine(text string) (Line, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil || fields == nil {
		return Line{}, fmt.Errorf("%w: a line that is not a JSON object: %q", ErrProtocol, text)
	}
	var kind Kind
	if err := json.Unmarshal(fields["kind"], &kind); err != nil || kind == "" {
		return Line{}, fmt.Errorf("%w: a line without a kind: %q", ErrProtocol, text)
	}
	dec, ok := decoders[kind]
	if !ok {
		return Line{}, fmt.Errorf("%w: unknown kind %q (known: %v): %q", ErrProtocol, kind, Kinds, text)
	}
	delete(fields, "kind")
	rest, _ := json.Marshal(fields)
	body, err := dec(rest)
	if err != nil {
		return Line{}, fmt.Errorf("%w: %s line: %v: %q", ErrProtocol, kind, err, text)
	}
	return Line{Body: body, text: text}, nil
}

// ParseOutput reads everything a driver printed on standard output, one
// line each; blank lines are skipped.
func ParseOutput(out string) ([]Line, error) {
	var lines []Line
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		l, err := ParseLine(text)
		if err != nil {
			return lines, err
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// All returns the bodies of kind T among lines, in order.
func All[T Body](lines []Line) []T {
	var out []T
	for _, l := range lines {
		if v, ok := l.Body.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// First returns the first body of kind T among lines.
func First[T Body](lines []Line) (T, bool) {
	for _, l := range lines {
		if v, ok := l.Body.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// Closing is the done line of a command that ran (exit ExitRan): there
// must be exactly one, and it must be the last line.
func Closing(lines []Line) (Done, error) {
	dones := All[Done](lines)
	switch {
	case len(dones) == 0:
		return Done{}, fmt.Errorf("%w: no done line among %d line(s)", ErrProtocol, len(lines))
	case len(dones) > 1:
		return Done{}, fmt.Errorf("%w: %d done lines, one closes the output", ErrProtocol, len(dones))
	case lines[len(lines)-1].Kind() != KindDone:
		return Done{}, fmt.Errorf("%w: a %s line after done", ErrProtocol, lines[len(lines)-1].Kind())
	}
	return dones[0], nil
}

// Writer prints lines, one whole line per write, safe for handlers
// running at once.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter prints to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Print writes b as one line.
func (w *Writer) Print(b Body) error {
	line, err := Marshal(b)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(append(line, '\n'))
	return err
}
