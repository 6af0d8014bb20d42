package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// oldBus is the controller connected to the bus a cutover moves from, or
// nil: while it switches (the nodes not moved yet are heard there), and
// in retire until what was left there is moved and folded (Moved), after
// which the mesh's side of that bus is removed under no listener of ours.
func oldBus(ctx context.Context, m *meshdesc.Mesh, st store.Store, o RunOptions) (plane.Controller, error) {
	c, err := st.Cutover(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c.Phase != store.CutoverSwitch && (c.Phase != store.CutoverRetire || !c.Moved.IsZero()) {
		return nil, nil
	}
	m, err = rollout.Described(ctx, m, st)
	if err != nil {
		return nil, err
	}
	control, mesh, err := rollout.OldControllerCredentials(ctx, m, st, c)
	if err != nil {
		return nil, err
	}
	var creds [2]wire.Credential
	for i, doc := range [][]byte{control, mesh} {
		if creds[i], err = wire.ParseCredential(doc); err != nil {
			return nil, err
		}
	}
	bus, _, err := dialAndAssert(ctx, m, creds, o)
	return bus, err
}

// withOld is bus, and old if there is one.
func withOld(bus, old plane.Controller) []plane.Controller {
	if old == nil {
		return []plane.Controller{bus}
	}
	return []plane.Controller{bus, old}
}

// listening is what the controller hears while a cutover moves the mesh:
// the mesh's bus, and the one it moves from. A provider not moved yet
// says its status there, and an event its consumer gave up on there is
// dead-lettered there: both are folded into the store as on the mesh's
// bus, so that nothing said on the old bus is lost when its mesh side is
// retired. The status is one fold, in the order the deliveries come:
// the two buses' deliveries take turns.
type listening struct {
	primary, old plane.Controller
	log          *slog.Logger

	turn sync.Mutex // one status delivery folded at a time, whichever bus it came on

	mu sync.Mutex
	// inHand is what the old bus handed over that the store does not
	// hold yet (a status delivery not acknowledged, a dead letter not
	// recorded), by kind and event id: the broker counts it neither as
	// waiting nor as gone.
	inHand map[string]int
}

func newListening(primary, old plane.Controller, log *slog.Logger) *listening {
	return &listening{primary: primary, old: old, log: log, inHand: map[string]int{}}
}

// follow folds the status of both buses, and the dead letters of the old
// one (the caller follows the mesh's), into st.
func (l *listening) follow(ctx context.Context, st store.Store) (stop func(), err error) {
	stopStatus, err := status.FollowStatus(ctx, l, st, l.log)
	if err != nil {
		return nil, fmt.Errorf("follow status: %w", err)
	}
	stopDead, err := status.FollowDead(ctx, oldDead{l}, st, l.log)
	if err != nil {
		stopStatus()
		return nil, fmt.Errorf("follow the dead letters on the bus the cutover moves from: %w", err)
	}
	return func() { stopDead(); stopStatus() }, nil
}

// EventsOrigin is the mesh's bus's: the status's positions count there.
func (l *listening) EventsOrigin(ctx context.Context) (plane.EventsOrigin, error) {
	return l.primary.EventsOrigin(ctx)
}

// FollowEvents hands deliver the status deliveries of both buses, one at
// a time.
func (l *listening) FollowEvents(ctx context.Context, deliver func(plane.EventMsg)) (stop func(), err error) {
	inTurn := func(msg plane.EventMsg) {
		l.turn.Lock()
		defer l.turn.Unlock()
		deliver(msg)
	}
	stopPrimary, err := l.primary.FollowEvents(ctx, inTurn)
	if err != nil {
		return nil, err
	}
	stopOld, err := l.old.FollowEvents(ctx, func(msg plane.EventMsg) {
		key := "status " + wire.HeaderValue(msg.Header(), wire.HeaderEventID)
		l.hold(key)
		inTurn(settling{EventMsg: msg, settled: func() { l.release(key) }})
	})
	if err != nil {
		stopPrimary()
		return nil, err
	}
	return func() { stopPrimary(); stopOld() }, nil
}

// Hear hears the heartbeats on both buses.
func (l *listening) Hear(ctx context.Context, heard func(node string, body []byte)) (stop func(), err error) {
	stopPrimary, err := l.primary.Hear(ctx, heard)
	if err != nil {
		return nil, err
	}
	stopOld, err := l.old.Hear(ctx, heard)
	if err != nil {
		stopPrimary()
		return nil, err
	}
	return func() { stopPrimary(); stopOld() }, nil
}

// Connected is the mesh's bus's: the one the liveness is recorded for.
func (l *listening) Connected() bool { return l.primary.Connected() }

// Quiet says nil once everything the controller's own queues on the old
// bus held is in the store: nothing handed over and not yet recorded,
// nothing waiting there to be handed over.
func (l *listening) Quiet(ctx context.Context) error {
	l.mu.Lock()
	n := 0
	for _, k := range l.inHand {
		n += k
	}
	l.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("%d status words or dead letters handed over on the old bus, not yet in the store", n)
	}
	b, ok := l.old.(plane.Backlog)
	if !ok {
		return nil
	}
	waiting, err := b.Backlog(ctx)
	if err != nil {
		return err
	}
	if waiting > 0 {
		return fmt.Errorf("%d status words or dead letters wait in the controller's queues on the old bus", waiting)
	}
	return nil
}

func (l *listening) hold(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A delivery held back (Hold) and handed again is still the one.
	l.inHand[key] = 1
}

func (l *listening) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inHand, key)
}

// settling is a status delivery that says when it is settled for good:
// acknowledged once folded, or refused. One held back comes again.
type settling struct {
	plane.EventMsg
	settled func()
}

func (s settling) Ack(ctx context.Context) error {
	err := s.EventMsg.Ack(ctx)
	if err == nil {
		s.settled()
	}
	return err
}

func (s settling) Term() error {
	err := s.EventMsg.Term()
	if err == nil {
		s.settled()
	}
	return err
}

// oldDead is the dead letters of the old bus, each counted in hand until
// the store holds it.
type oldDead struct{ l *listening }

func (d oldDead) FollowDead(ctx context.Context, after uint64, deliver func(plane.Dead) error) (stop func(), err error) {
	return d.l.old.FollowDead(ctx, after, func(x plane.Dead) error {
		key := "dead " + x.Consumer + " " + x.EventID
		d.l.hold(key)
		err := deliver(x)
		if err == nil {
			d.l.release(key)
		}
		return err
	})
}
