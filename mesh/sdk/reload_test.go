package sdk_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAnAnswerLostToAReloadIsAskedForAgain: nats-server forgets, when it
// reloads its configuration, every reply a responder may answer
// (compose's TestAReloadRevokesAResponderReplyGrant pins it), so the
// answer to a call taken before a reload and sent after it is refused.
// The caller asks again; the runtime that took the call sends the answer
// it kept. The tool runs once, though two runtimes serve it and both hear
// the caller asking again.
func TestAnAnswerLostToAReloadIsAskedForAgain(t *testing.T) {
	tm := startMesh(t, natsplane.DefaultPolicy())
	var runs atomic.Int64
	taken := make(chan struct{}, 2)
	resume := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	t.Cleanup(release) // before the runtimes close: a waiting handler returns
	for range 2 {
		runtime := tm.connect(t, catalogUser)
		if err := runtime.Handle("catalog_tools", func(context.Context, []byte) ([]byte, error) {
			runs.Add(1)
			taken <- struct{}{}
			<-resume
			return []byte(`{"tools":[]}`), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	alice := tm.connect(t, wire.PersonUser("alice"))
	type result struct {
		out []byte
		err error
	}
	answered := make(chan result, 1)
	go func() {
		out, err := alice.Request(ctxFor(t, 15*time.Second), "mesh-catalog", "catalog_tools", nil)
		answered <- result{out, err}
	}()
	select {
	case <-taken:
	case <-time.After(5 * time.Second):
		t.Fatal("the call reached no runtime within 5s")
	}
	if err := tm.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	release()
	r := <-answered
	if r.err != nil || string(r.out) != `{"tools":[]}` {
		t.Fatalf("a call whose answer crossed a reload: expected its answer, got %s, %v", r.out, r.err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times for one call; expected once", n)
	}
}

// TestARuntimeThatCannotBeAskedAgainIsWaitedFor: a runtime serving a tool
// without the subject for asking again (another implementation, an
// older SDK) makes the server answer the asking with "no responders"; the
// caller has heard that nobody serves the tool only when the call itself
// drew it. It waits on: a slow answer comes, silence is a timeout.
func TestARuntimeThatCannotBeAskedAgainIsWaitedFor(t *testing.T) {
	tm := startMesh(t, natsplane.DefaultPolicy())
	runtime, _ := tm.raw(t, catalogUser)
	var calls atomic.Int64
	if _, err := runtime.QueueSubscribe(wire.ToolSubject("mesh-catalog", "catalog_tools"), wire.ToolQueue("mesh-catalog", "catalog_tools"), func(m *nats.Msg) {
		if calls.Add(1) == 1 {
			time.AfterFunc(2500*time.Millisecond, func() { _ = m.Respond([]byte(`{"tools":[]}`)) })
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Flush(); err != nil {
		t.Fatal(err)
	}
	alice := tm.connect(t, wire.PersonUser("alice"))
	out, err := alice.Request(ctxFor(t, 10*time.Second), "mesh-catalog", "catalog_tools", nil)
	if err != nil || string(out) != `{"tools":[]}` {
		t.Fatalf("an answer after the asking again drew no responders: expected it, got %s, %v", out, err)
	}
	if _, err := alice.Request(ctxFor(t, 2500*time.Millisecond), "mesh-catalog", "catalog_tools", nil); !errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("a silent runtime that cannot be asked again: expected ErrTimeout, got %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the runtime was sent %d calls; expected 2 (asking again is not calling again)", n)
	}
}
