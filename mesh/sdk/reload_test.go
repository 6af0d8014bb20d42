package sdk_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/link/natsplane"
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
