package control

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// gatedStore holds each Update until the test lets it through.
type gatedStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *gatedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Update(ctx, fn)
}

// runComposer runs c until the test ends.
func runComposer(t *testing.T, c *composer) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestTheComposerComposesOnceForWhatWasAskedWhileBusy: asks made while a
// composition runs are one composition more, whatever their number.
func TestTheComposerComposesOnceForWhatWasAskedWhileBusy(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	st := &gatedStore{Store: b.St, entered: make(chan struct{}), release: make(chan struct{})}
	c := newComposer(func() *meshdesc.Mesh { return b.M }, st, b.Dir, b.Opts)
	runComposer(t, c)

	c.ask()
	<-st.entered // the first composition is under way
	for range 5 {
		c.ask()
	}
	st.release <- struct{}{}
	<-st.entered // the one composition for the five
	st.release <- struct{}{}
	controllertest.Eventually(t, 5*time.Second, "two compositions", func() bool { return c.count() == 2 })
	if len(c.kick) != 0 {
		t.Fatalf("expected nothing more asked of the composer, got %d asks pending", len(c.kick))
	}
}

// TestTheComposerTriesAgainUntilTheStoreTakesIt: a composition the store
// refuses is tried again, with no further ask, once the store is back.
func TestTheComposerTriesAgainUntilTheStoreTakesIt(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	st := &unavailableStore{Store: b.St}
	st.set(true)
	c := newComposer(func() *meshdesc.Mesh { return b.M }, st, b.Dir, b.Opts)
	runComposer(t, c)
	c.ask()
	// The first retry comes after controlRetry: still refused if it
	// comes before the store is back, and tried again later.
	time.AfterFunc(controlRetry/2, func() { st.set(false) })
	controllertest.Eventually(t, 3*controlRetry+5*time.Second, "a composition once the store is back", func() bool { return c.count() == 1 })
}

// TestAStoppedComposerMakesWhatWasAsked: a controller stopped with a
// composition asked for makes it before it goes.
func TestAStoppedComposerMakesWhatWasAsked(t *testing.T) {
	b := controllertest.NewBed(t, controllertest.SampleMesh(t))
	c := newComposer(func() *meshdesc.Mesh { return b.M }, b.St, b.Dir, b.Opts)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.ask()
	c.run(ctx)
	if c.count() != 1 {
		t.Fatalf("expected the composition asked for made on the way out, got %d", c.count())
	}
}
