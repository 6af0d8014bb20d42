package sdk_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/wire"
)

// What the server itself writes to a reply subject someone aimed at an
// event subject lands in EVENTS (a reply subject is checked against
// nobody's permissions: NATS-NOTES) and reaches the subject's consumers.
// It is never handled. The server-side routes are closed elsewhere; this
// is the readers' line behind them.
func TestNATSServerRepliesOnAnEventSubjectAreNeverHandled(t *testing.T) {
	tm := startMesh(t, natsplane.DefaultPolicy())
	logger := tm.connect(t, loggerUser)
	var readings recorder
	if err := logger.Subscribe("sensor.reading", readings.handle); err != nil {
		t.Fatal(err)
	}
	subject := wire.EventSubject("sensor", "reading")

	// The PubAck route: sensor publishes an event of its own, naming its
	// own event subject as the reply, so the stream's PubAck is stored
	// there too: a body and no headers.
	sensor, _ := tm.raw(t, sensorUser)
	msg := nats.NewMsg(subject)
	msg.Reply = subject
	for name, v := range map[string]string{
		wire.HeaderEventID: "e-1", wire.HeaderSource: "sensor", wire.HeaderNode: "node-a",
		wire.HeaderTime: "2026-09-16T10:00:00.000Z", wire.HeaderContentType: wire.ContentTypeJSON,
	} {
		msg.Header.Set(name, v)
	}
	msg.Data = []byte(`{"celsius":21.5}`)
	if err := sensor.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if err := sensor.Flush(); err != nil {
		t.Fatal(err)
	}
	pubAck := tm.storedAt(t, 2)
	var ack struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}
	if pubAck.Subject != subject || len(pubAck.Header) != 0 || json.Unmarshal(pubAck.Data, &ack) != nil || ack.Stream != wire.StreamEvents || ack.Seq != 1 {
		t.Fatalf("expected EVENTS to hold the PubAck of seq 1 on %s, got %s %v %s", subject, pubAck.Subject, pubAck.Header, pubAck.Data)
	}
	ci := tm.settled(t, 2)
	if ci.NumRedelivered != 0 {
		t.Fatalf("expected the PubAck terminated, not redelivered: %+v", ci)
	}

	// The status route: logger asks its own consumer for a message it
	// does not have, naming the event subject as the reply; the server's
	// 404 status is stored there.
	loggerNC, _ := tm.raw(t, loggerUser)
	if err := loggerNC.PublishRequest(wire.ConsumerNext(wire.StreamEvents, loggerCons), subject, []byte(`{"batch":1,"no_wait":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := loggerNC.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		info, err := tm.js.Stream(ctxFor(t, 5*time.Second), wire.StreamEvents)
		if err != nil {
			return false, err.Error()
		}
		n := info.CachedInfo().State.Msgs
		return n >= 3, fmt.Sprintf("EVENTS holds %d messages", n)
	})
	// The server stores its status reply as an empty message: no
	// envelope, refused and terminated like the PubAck.
	if status := tm.storedAt(t, 3); status.Subject != subject || len(status.Header) != 0 || len(status.Data) != 0 {
		t.Fatalf("expected EVENTS to hold the empty status reply on %s, got %s %v %q", subject, status.Subject, status.Header, status.Data)
	}
	if ci := tm.settled(t, 3); ci.NumRedelivered != 0 {
		t.Fatalf("expected the status reply terminated, not redelivered: %+v", ci)
	}
	if got := readings.got(); len(got) != 1 || got[0].ID != "e-1" {
		t.Fatalf("expected only the event handled, got %v", got)
	}
}
