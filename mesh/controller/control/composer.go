package control

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// composer makes what the store holds live in nats.conf (rollout.Apply) once for
// all the changes asked of it while it was busy: the enrolments a loop
// handles while one composition runs cost one composition more, not one
// each. A composition costs O(users) in the store and a reload costs the
// server O(connected clients), so composing per enrolment made a fleet's
// enrolment grow as N² (docs/living-mesh.md, "Scale").
//
// Every composition of the controller process goes through its lock, a
// push's as well as the composer's own: each reads the store and then
// writes nats.conf, and two of them interleaved could leave the older
// composition written last.
type composer struct {
	mu   sync.Mutex // held across a composition: its update and nats.conf
	kick chan struct{}
	// due are the compositions asked for later (askAt), and wake says a
	// new one was asked.
	dueMu sync.Mutex
	due   []time.Time
	wake  chan struct{}
	mesh  func() *meshdesc.Mesh
	st    store.Store
	dir   string
	o     rollout.Options

	composed atomic.Int64 // compositions made, for the tests
}

func newComposer(mesh func() *meshdesc.Mesh, st store.Store, dir string, o rollout.Options) *composer {
	return &composer{kick: make(chan struct{}, 1), wake: make(chan struct{}, 1), mesh: mesh, st: st, dir: dir, o: o.WithDefaults()}
}

// revokeEvery is how finely askAt keeps its times: each is put off to
// the next multiple of it. A revocation is not urgent (the token's user
// can do nothing it could not before), and a fleet enrolling over a
// minute would otherwise ask for a composition, and the server for a
// reload, at every token's grace end, one after another, while it is
// busiest (the benchmark's push at N=500 took 36 s so, against 10 s
// before the grace).
const revokeEvery = 10 * time.Second

// askAt asks for a composition at t (a spent token's grace ending), or
// up to revokeEvery after.
func (c *composer) askAt(t time.Time) {
	t = t.Truncate(revokeEvery).Add(revokeEvery)
	c.dueMu.Lock()
	if !slices.ContainsFunc(c.due, t.Equal) {
		c.due = append(c.due, t)
	}
	c.dueMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// nextDue is the earliest composition asked for later, if any.
func (c *composer) nextDue() (time.Time, bool) {
	c.dueMu.Lock()
	defer c.dueMu.Unlock()
	if len(c.due) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(c.due, time.Time.Compare), true
}

// takeDue forgets the compositions asked for at or before now, which one
// composition now makes, and says whether there were any.
func (c *composer) takeDue(now time.Time) bool {
	c.dueMu.Lock()
	defer c.dueMu.Unlock()
	n := len(c.due)
	c.due = slices.DeleteFunc(c.due, func(t time.Time) bool { return !t.After(now) })
	return len(c.due) < n
}

// ask asks for a composition soon; asks made before it starts are one.
func (c *composer) ask() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// locked runs f holding the composition lock.
func (c *composer) locked(f func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f()
}

// run composes whenever asked, now or at a time asked for, until ctx
// ends; then it makes a composition still asked for now, so a stopped
// controller leaves nothing of what it answered uncomposed (and the next
// one composes at its start anyway: controller.Run). A composition that fails is
// tried again, waiting longer each time up to controlRetryMax; asks
// meanwhile are the same one.
func (c *composer) run(ctx context.Context) {
	for {
		var due <-chan time.Time
		if t, ok := c.nextDue(); ok {
			due = time.After(time.Until(t))
		}
		select {
		case <-ctx.Done():
			select {
			case <-c.kick:
				c.last(ctx)
			default:
			}
			return
		case <-c.wake:
			continue
		case <-due:
			if !c.takeDue(time.Now()) {
				continue
			}
		case <-c.kick:
			// A composition now makes those asked for until now too.
			c.takeDue(time.Now())
		}
		if !c.retrying(ctx) {
			c.last(ctx)
			return
		}
	}
}

// retrying composes until it succeeds (true) or ctx ends (false).
func (c *composer) retrying(ctx context.Context) bool {
	wait := time.Duration(0)
	for ctx.Err() == nil {
		err := c.compose(ctx)
		if err == nil {
			return true
		}
		wait = min(max(2*wait, controlRetry), controlRetryMax)
		c.o.Logger.Warn("composition failed; tried again", "delay", wait, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return false
}

// last is the one composition made on the way out, bounded by
// handleTimeout.
func (c *composer) last(ctx context.Context) {
	if err := c.compose(context.WithoutCancel(ctx)); err != nil {
		c.o.Logger.Warn("composition on stopping failed; the next start composes", "err", err)
	}
}

func (c *composer) compose(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, handleTimeout)
	defer cancel()
	err := c.locked(func() error {
		_, err := rollout.Apply(ctx, c.mesh(), c.st, c.dir, c.o)
		return err
	})
	if err == nil {
		c.composed.Add(1)
	}
	return err
}

// count is how many compositions the composer made.
func (c *composer) count() int { return int(c.composed.Load()) }

// scanTokens asks the composer to revoke each token's user when it leaves
// the configuration (store.Token.Leaves): the grace after its expiry while it
// is unspent, after its spend once spent. A token whose user left since
// the last scan (after; one that lived less than a scan) is revoked now.
// Without it an expired token's user stayed on the bus until some
// unrelated composition.
func scanTokens(ctx context.Context, st store.Reader, c *composer, after, now time.Time, grace time.Duration) error {
	tokens, err := st.Tokens(ctx)
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	for _, t := range tokens {
		switch leaves := t.Leaves(grace); {
		case leaves.After(now):
			c.askAt(leaves)
		case leaves.After(after):
			c.ask()
		}
	}
	return nil
}
