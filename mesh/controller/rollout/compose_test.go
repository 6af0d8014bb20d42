package rollout_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/rollout"
)

// TestACompositionWaitsForTheOneInHand: while a composition holds the
// state directory's lock (here the test, as another process would), an
// Apply neither commits nor writes nats.conf; it does once the lock is
// let go. Two compositions interleaved could leave the older written last.
func TestACompositionWaitsForTheOneInHand(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	held, release := make(chan struct{}), make(chan struct{})
	var released atomic.Bool
	go func() {
		_ = rollout.Composing(controllertest.Ctx(t), b.Dir, func() error {
			close(held)
			<-release
			released.Store(true)
			return nil
		})
	}()
	<-held
	applied := make(chan bool, 1)
	go func() {
		_, _, err := rollout.IssueToken(controllertest.Ctx(t), b.M, b.St, b.Dir, "node-a", time.Hour, b.Opts)
		if err != nil {
			t.Error(err)
		}
		applied <- released.Load()
	}()
	// The lock is let go after a while; an Apply that did not wait for it
	// has long returned by then.
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	select {
	case after := <-applied:
		if !after {
			t.Fatal("the token's composition was made while another held the lock")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the composition did not follow once the lock was let go")
	}
}
