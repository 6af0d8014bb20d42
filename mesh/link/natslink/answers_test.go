package natslink

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// An answer is kept for its reply alone, until wire.AnswersKept has
// passed, and what is kept together stays within maxKeptBytes, the
// oldest going first.
func TestAnAnswerIsKeptForItsReplyForAWhile(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a := newAnswers()
	a.now = func() time.Time { return now }
	a.keep(&nats.Msg{Subject: "_INBOX.person.alice.x.1", Data: []byte("one")})
	if got, ok := a.again("_INBOX.person.alice.x.1"); !ok || string(got.Data) != "one" {
		t.Fatalf("the answer kept for its reply: got %v, %v", got, ok)
	}
	if _, ok := a.again("_INBOX.person.mallory.x.1"); ok {
		t.Fatal("an answer was given for a reply it was not sent to")
	}
	now = now.Add(wire.AnswersKept - time.Second)
	if _, ok := a.again("_INBOX.person.alice.x.1"); !ok {
		t.Fatal("the answer went before wire.AnswersKept")
	}
	now = now.Add(time.Second)
	if _, ok := a.again("_INBOX.person.alice.x.1"); ok || a.bytes != 0 || len(a.order) != 0 {
		t.Fatalf("the answer is still kept at wire.AnswersKept (%d bytes, %d answers)", a.bytes, len(a.order))
	}

	big := strings.Repeat("x", 1<<20)
	for i := range 10 {
		a.keep(&nats.Msg{Subject: fmt.Sprintf("_INBOX.person.alice.x.%d", i), Data: []byte(big)})
	}
	if a.bytes > maxKeptBytes {
		t.Fatalf("kept %d bytes; the bound is %d", a.bytes, maxKeptBytes)
	}
	if _, ok := a.again("_INBOX.person.alice.x.0"); ok {
		t.Fatal("the oldest answer is still kept past the bound")
	}
	if _, ok := a.again("_INBOX.person.alice.x.9"); !ok {
		t.Fatal("the newest answer went")
	}
	a.keep(&nats.Msg{Subject: "_INBOX.person.alice.huge.1", Data: make([]byte, maxKeptBytes)})
	if _, ok := a.again("_INBOX.person.alice.huge.1"); ok {
		t.Fatal("an answer larger than the bound was kept")
	}
	if _, ok := a.again("_INBOX.person.alice.x.9"); !ok {
		t.Fatal("an answer too large to keep pushed out what was kept")
	}
}
