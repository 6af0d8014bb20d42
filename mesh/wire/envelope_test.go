package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func validHeaders() map[string][]string {
	return map[string][]string{
		HeaderEventID:     {"0d6f1c2e-1b7a-4f3e-9a55-6c1d2e3f4a5b"},
		HeaderSource:      {"sensor"},
		HeaderNode:        {"node-a"},
		HeaderTime:        {"2026-09-16T10:00:00.000Z"},
		HeaderContentType: {ContentTypeJSON},
	}
}

func TestValidateHeadersAcceptsTheEnvelope(t *testing.T) {
	h := validHeaders()
	h["x-trace"] = []string{"unknown to every implementation"}
	h["Nats-Msg-Id"] = []string{"added by the publisher"}
	h[HeaderCausationID] = []string{"c-1"}
	if err := ValidateHeaders(h); err != nil {
		t.Fatalf("expected an envelope with unknown headers to be accepted, got %v", err)
	}
	h[HeaderContentType] = []string{"application/json; charset=utf-8"}
	if err := ValidateHeaders(h); err != nil {
		t.Fatalf("expected a content type parameter to be accepted, got %v", err)
	}
}

func TestValidateHeadersNamesTheMissingHeader(t *testing.T) {
	for _, name := range RequiredHeaders {
		for _, value := range [][]string{nil, {}, {""}} {
			h := validHeaders()
			if value == nil {
				delete(h, name)
			} else {
				h[name] = value
			}
			err := ValidateHeaders(h)
			var he *HeaderError
			if !errors.Is(err, ErrMissingHeader) || !errors.As(err, &he) || he.Header != name {
				t.Errorf("without %s (%q): expected ErrMissingHeader naming it, got %v", name, value, err)
			}
		}
	}
	// Names are exact: a capitalised header is not the envelope's.
	h := validHeaders()
	h["X-Event-Id"] = h[HeaderEventID]
	delete(h, HeaderEventID)
	if err := ValidateHeaders(h); !errors.Is(err, ErrMissingHeader) {
		t.Errorf("expected X-Event-Id not to stand for x-event-id, got %v", err)
	}
}

func TestValidateHeadersRefusesBadValues(t *testing.T) {
	cases := map[string]string{
		HeaderTime:        "yesterday",
		HeaderContentType: "text/plain",
	}
	for name, value := range cases {
		h := validHeaders()
		h[name] = []string{value}
		err := ValidateHeaders(h)
		var he *HeaderError
		if !errors.Is(err, ErrBadHeader) || !errors.As(err, &he) || he.Header != name {
			t.Errorf("%s=%q: expected ErrBadHeader naming it, got %v", name, value, err)
		}
	}
}

func TestTimeFormat(t *testing.T) {
	at := time.Date(2026, 9, 16, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	if got, want := FormatTime(at), "2026-09-16T10:00:00.000Z"; got != want {
		t.Fatalf("expected %s, got %s", want, got)
	}
	if got, want := FormatTime(at.Add(1234567*time.Nanosecond)), "2026-09-16T10:00:00.001Z"; got != want {
		t.Fatalf("expected %s, got %s", want, got)
	}
	for _, in := range []string{"2026-09-16T10:00:00Z", "2026-09-16T12:00:00+02:00", "2026-09-16T10:00:00.000000001Z"} {
		if _, err := ParseTime(in); err != nil {
			t.Errorf("ParseTime(%q): %v", in, err)
		}
	}
	if _, err := ParseTime("2026-09-16 10:00"); !errors.Is(err, ErrBadHeader) {
		t.Errorf("expected ErrBadHeader, got %v", err)
	}
}

func TestEventKeyFromSubject(t *testing.T) {
	mod, key, err := EventKeyFromSubject(EventSubject("sensor", "alarm.raised"))
	if err != nil || mod != "sensor" || key != "alarm.raised" {
		t.Fatalf("expected sensor alarm.raised, got %q %q %v", mod, key, err)
	}
	for _, bad := range []string{"mesh.mod.sensor.tool.calibrate", "mesh.seat.s.event.v", "mesh.mod..event.x", "mesh.mod.a.event.", "other"} {
		if _, _, err := EventKeyFromSubject(bad); !errors.Is(err, ErrNotEventSubject) {
			t.Errorf("EventKeyFromSubject(%q): expected ErrNotEventSubject, got %v", bad, err)
		}
	}
}

func TestToolErrorEncoding(t *testing.T) {
	h := ToolErrorHeaders("disk full\r\non node-a\n")
	if got := h[HeaderToolError]; len(got) != 1 || got[0] != "disk full on node-a" {
		t.Fatalf("expected one line, got %q", got)
	}
	msg, failed := ToolFailure(h)
	if !failed || msg != "disk full on node-a" {
		t.Fatalf("expected the failure back, got %q %v", msg, failed)
	}
	if msg, failed := ToolFailure(ToolErrorHeaders(" \n")); !failed || msg != ToolFailedMessage {
		t.Fatalf("expected an empty message to read %q, got %q %v", ToolFailedMessage, msg, failed)
	}
	if _, failed := ToolFailure(map[string][]string{"x-other": {"v"}}); failed {
		t.Fatal("expected a reply without x-error to be a result")
	}
	if msg, failed := ToolFailure(map[string][]string{HeaderToolError: {}}); !failed || msg != ToolFailedMessage {
		t.Fatalf("expected a bare x-error to be a failure, got %q %v", msg, failed)
	}
}

func TestValidateEventRefusesASpoofedSource(t *testing.T) {
	h := validHeaders()
	if err := ValidateEvent("sensor", h, []byte(`{"celsius":21.5}`)); err != nil {
		t.Fatalf("expected the envelope of sensor on sensor's subject accepted, got %v", err)
	}
	// The reproduction of issue 7: a module on its own subject claiming
	// to be catalog, from another node.
	h[HeaderSource] = []string{"catalog"}
	h[HeaderNode] = []string{"node-b"}
	err := ValidateEvent("sensor", h, []byte(`{"celsius":21.5}`))
	var he *HeaderError
	if !errors.Is(err, ErrSourceMismatch) || !errors.As(err, &he) || he.Header != HeaderSource {
		t.Fatalf("expected ErrSourceMismatch naming x-source, got %v", err)
	}
	if !strings.Contains(err.Error(), `"catalog"`) || !strings.Contains(err.Error(), "sensor") {
		t.Fatalf("expected the refusal to name both modules, got %v", err)
	}
}

func TestValidateEventRefusesABodyThatIsNotJSON(t *testing.T) {
	for _, body := range []string{"", "not json", `{"celsius":`, "\xff"} {
		if err := ValidateEvent("sensor", validHeaders(), []byte(body)); !errors.Is(err, ErrBadBody) {
			t.Errorf("body %q: expected ErrBadBody, got %v", body, err)
		}
	}
	for _, body := range []string{`{}`, `21.5`, `"text"`, `null`, ` [1, 2] `} {
		if err := ValidateEvent("sensor", validHeaders(), []byte(body)); err != nil {
			t.Errorf("body %q: expected JSON accepted, got %v", body, err)
		}
	}
}

// What a server writes to a reply subject someone aimed at EVENTS is
// never an event: a PubAck, an API answer, a pull's status.
func TestValidateEventRefusesWhatIsNoEnvelope(t *testing.T) {
	withStatus := validHeaders()
	withStatus[HeaderNATSStatus] = []string{"404"}
	cases := map[string]map[string][]string{
		"a PubAck, no headers":          nil,
		"an empty header block":         {},
		"an idle heartbeat":             {HeaderNATSStatus: {"100"}, "Description": {"Idle Heartbeat"}},
		"a request timeout":             {HeaderNATSStatus: {"408"}, "Description": {"Request Timeout"}},
		"a stranger's headers only":     {"x-trace": {"abc"}},
		"a status line beside envelope": withStatus,
	}
	for what, h := range cases {
		err := ValidateEvent("sensor", h, []byte(`{"stream":"EVENTS","seq":1}`))
		if !errors.Is(err, ErrNotEnvelope) {
			t.Errorf("%s: expected ErrNotEnvelope, got %v", what, err)
		}
	}
}

func TestValidateHeadersRefusesOversizedValues(t *testing.T) {
	cases := map[string]int{
		HeaderEventID:     MaxIDBytes,
		HeaderCausationID: MaxIDBytes,
		HeaderSchema:      MaxSchemaBytes,
		HeaderSource:      32,
		HeaderNode:        32,
	}
	for name, limit := range cases {
		h := validHeaders()
		h[name] = []string{"a" + strings.Repeat("b", limit-1)}
		if err := ValidateHeaders(h); err != nil {
			t.Errorf("%s of %d bytes: expected it accepted, got %v", name, limit, err)
		}
		h[name] = []string{"a" + strings.Repeat("b", limit)}
		err := ValidateHeaders(h)
		var he *HeaderError
		if !errors.Is(err, ErrBadHeader) || !errors.As(err, &he) || he.Header != name {
			t.Errorf("%s of %d bytes: expected ErrBadHeader naming it, got %v", name, limit+1, err)
		}
	}
	// An unknown header is ignored, but not unbounded.
	h := validHeaders()
	h["x-trace"] = []string{strings.Repeat("t", MaxHeaderValueBytes)}
	if err := ValidateHeaders(h); err != nil {
		t.Errorf("expected an unknown header at the value limit accepted, got %v", err)
	}
	h["x-trace"] = []string{strings.Repeat("t", MaxHeaderValueBytes+1)}
	err := ValidateHeaders(h)
	var he *HeaderError
	if !errors.Is(err, ErrBadHeader) || !errors.As(err, &he) || he.Header != "x-trace" {
		t.Errorf("expected an oversized unknown header refused naming it, got %v", err)
	}
	if len(err.Error()) > 200 {
		t.Errorf("expected the refusal not to echo the value, got %d bytes", len(err.Error()))
	}
	// Many values each within the limit, together over it.
	h = validHeaders()
	for i := range 5 {
		h[fmt.Sprintf("x-pad-%d", i)] = []string{strings.Repeat("p", MaxHeaderValueBytes)}
	}
	if err := ValidateHeaders(h); !errors.Is(err, ErrHeadersTooLarge) {
		t.Errorf("expected ErrHeadersTooLarge, got %v", err)
	}
}

func TestValidateHeadersRefusesAmbiguousHeaders(t *testing.T) {
	// Two values: one reader takes the first, another the last.
	h := validHeaders()
	h[HeaderSource] = []string{"sensor", "catalog"}
	var he *HeaderError
	if err := ValidateHeaders(h); !errors.Is(err, ErrBadHeader) || !errors.As(err, &he) || he.Header != HeaderSource {
		t.Errorf("expected a repeated x-source refused naming it, got %v", err)
	}
	// The same name in another case beside it: a reader that folds case
	// could take either.
	h = validHeaders()
	h["X-Source"] = []string{"catalog"}
	if err := ValidateHeaders(h); !errors.Is(err, ErrBadHeader) || !errors.As(err, &he) || he.Header != "X-Source" {
		t.Errorf("expected X-Source beside x-source refused naming it, got %v", err)
	}
	// An id only visible ASCII: a control character or a space would
	// make two ids that print alike.
	for _, id := range []string{"a b", "a\x00b", "a\tb", "ä"} {
		h = validHeaders()
		h[HeaderEventID] = []string{id}
		if err := ValidateHeaders(h); !errors.Is(err, ErrBadHeader) {
			t.Errorf("x-event-id %q: expected ErrBadHeader, got %v", id, err)
		}
	}
	// An optional header left empty reads as absent.
	h = validHeaders()
	h[HeaderSchema] = []string{""}
	if err := ValidateHeaders(h); err != nil {
		t.Errorf("expected an empty x-schema read as absent, got %v", err)
	}
}

func TestSeatAndMalformedSubjectsAreNoModuleEvents(t *testing.T) {
	for _, subject := range []string{
		SeatEventSubject("mesh-catalog", "saved"),
		"mesh.mod.Sensor.event.reading",
		"mesh.mod.sensor.event.reading..x",
		"mesh.mod.sensor.event.Reading",
	} {
		if _, _, err := EventKeyFromSubject(subject); !errors.Is(err, ErrNotEventSubject) {
			t.Errorf("EventKeyFromSubject(%q): expected ErrNotEventSubject, got %v", subject, err)
		}
		if _, _, ok := EventOf(subject); ok {
			t.Errorf("EventOf(%q): expected false", subject)
		}
	}
	if _, _, err := EventKeyFromSubject(SeatEventSubject("mesh-catalog", "saved")); !strings.Contains(fmt.Sprint(err), "seat") {
		t.Errorf("expected a seat's subject refused for being a seat's, got %v", err)
	}
}
