package wire

import (
	"errors"
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
