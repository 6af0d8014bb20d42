package controller

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// gatedStore holds each Update until the test lets it through.
type gatedStore struct {
	Store
	entered chan struct{}
	release chan struct{}
}

func (s *gatedStore) Update(ctx context.Context, fn func(Tx) error) error {
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
	b := newBed(t, sampleMesh(t))
	st := &gatedStore{Store: b.st, entered: make(chan struct{}), release: make(chan struct{})}
	c := newComposer(func() *meshdesc.Mesh { return b.m }, st, b.dir, b.opts)
	runComposer(t, c)

	c.ask()
	<-st.entered // the first composition is under way
	for range 5 {
		c.ask()
	}
	st.release <- struct{}{}
	<-st.entered // the one composition for the five
	st.release <- struct{}{}
	eventually(t, 5*time.Second, "two compositions", func() bool { return c.count() == 2 })
	if len(c.kick) != 0 {
		t.Fatalf("expected nothing more asked of the composer, got %d asks pending", len(c.kick))
	}
}

// TestTheComposerTriesAgainUntilTheStoreTakesIt: a composition the store
// refuses is tried again, with no further ask, once the store is back.
func TestTheComposerTriesAgainUntilTheStoreTakesIt(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	st := &unavailableStore{Store: b.st}
	st.set(true)
	c := newComposer(func() *meshdesc.Mesh { return b.m }, st, b.dir, b.opts)
	runComposer(t, c)
	c.ask()
	// The first retry comes after controlRetry: still refused if it
	// comes before the store is back, and tried again later.
	time.AfterFunc(controlRetry/2, func() { st.set(false) })
	eventually(t, 3*controlRetry+5*time.Second, "a composition once the store is back", func() bool { return c.count() == 1 })
}

// TestAStoppedComposerMakesWhatWasAsked: a controller stopped with a
// composition asked for makes it before it goes.
func TestAStoppedComposerMakesWhatWasAsked(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	c := newComposer(func() *meshdesc.Mesh { return b.m }, b.st, b.dir, b.opts)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.ask()
	c.run(ctx)
	if c.count() != 1 {
		t.Fatalf("expected the composition asked for made on the way out, got %d", c.count())
	}
}

// containsUser says whether the composed configuration conf has user.
func containsUser(conf []byte, user string) bool {
	return bytes.Contains(conf, []byte(strconv.Quote(user)))
}

// TestRunComposesWhatAStoppedControllerLeft: an enrolment answered and
// acknowledged, its composition never made (the controller stopped in
// between), is made live by the next controller's start: the node's new
// password is in nats.conf before the controller is ready.
func TestRunComposesWhatAStoppedControllerLeft(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	ctx := ctxT(t)
	tok, _, req := b.claim("node-a")
	e, err := Enrol(ctx, b.m, b.st, b.dir, LedgerKey(wire.SubjectEnrol, "m1", 1), req.Marshal(), b.opts, func(Enrolment) error { return nil })
	if err != nil || e.Answer.Refused != "" {
		t.Fatalf("enrol: %+v (%v)", e, err)
	}
	secrets, _ := b.st.Secrets(ctx)
	hash := secrets[wire.HostUser("node-a")].Hash
	conf := func() []byte { c, _ := os.ReadFile(Layout{b.dir}.NATSConfig()); return c }
	if bytes.Contains(conf(), []byte(hash)) {
		t.Fatal("the enrolment was composed before the controller ran: the test shows nothing")
	}
	b.start()
	var logs testutil.SyncBuffer
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, b.m, b.st, RunOptions{Dir: b.dir, Apply: b.opts, StartTimeout: 20 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	defer func() { cancel(); <-done }()
	eventually(t, 20*time.Second, "the controller ready", func() bool { return strings.Contains(logs.String(), `"msg":"ready"`) })
	if !bytes.Contains(conf(), []byte(hash)) {
		t.Fatal("expected the node's new password composed once the controller is ready")
	}
	// The spent token's user stays for its grace, then is revoked.
	eventually(t, b.opts.SpentTokenGrace+10*time.Second, "the spent token's user revoked after its grace", func() bool {
		return !containsUser(conf(), wire.EnrolUser(tok.Name))
	})
}

// TestACompositionWaitsForTheOneInHand: while a composition holds the
// state directory's lock (here the test, as another process would), an
// Apply neither commits nor writes nats.conf; it does once the lock is
// let go. Two compositions interleaved could leave the older written last.
func TestACompositionWaitsForTheOneInHand(t *testing.T) {
	b := newBed(t, sampleMesh(t))
	held, release := make(chan struct{}), make(chan struct{})
	var released atomic.Bool
	go func() {
		_ = composing(ctxT(t), b.dir, func() error {
			close(held)
			<-release
			released.Store(true)
			return nil
		})
	}()
	<-held
	applied := make(chan bool, 1)
	go func() {
		_, _, err := IssueToken(ctxT(t), b.m, b.st, b.dir, "node-a", time.Hour, b.opts)
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
