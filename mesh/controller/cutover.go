package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// CutoverEvery is how often the running controller steps a cutover in
// progress (rollout.StepCutover): each step reads the store and the
// buses, so a phase ends within this of what ends it.
const CutoverEvery = 500 * time.Millisecond

// driveCutover steps a cutover in progress every CutoverEvery until
// stop; reconnect ends the serving when a phase changes the buses. both
// is what the controller hears while it listens on the old bus too, nil
// while it does not.
func driveCutover(ctx context.Context, m *meshdesc.Mesh, st store.Store, o RunOptions, guard *rollout.Guard, both *listening, reconnect func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	b := &cutoverBuses{o: o, guard: guard, both: both, reconnect: reconnect, st: st}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(CutoverEvery)
		defer t.Stop()
		var said string
		for {
			_, err := rollout.StepCutover(ctx, m, st, o.Apply, b)
			if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil && err.Error() != said {
				o.Logger.Warn("cutover: the phase waits", "err", err)
			}
			if err != nil {
				said = err.Error()
			} else {
				said = ""
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// cutoverBuses is what a cutover asks of the buses, as the running
// controller does it.
type cutoverBuses struct {
	o         RunOptions
	st        store.Store
	guard     *rollout.Guard
	both      *listening
	reconnect func()
}

func (b *cutoverBuses) Login(ctx context.Context, doc []byte) error {
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return buses.Login(ctx, cred, b.o.Bus.Dial...)
}

func (b *cutoverBuses) AssertNew(ctx context.Context, m *meshdesc.Mesh, controller, controllerMesh []byte) error {
	c, err := wire.ParseCredential(controller)
	if err != nil {
		return err
	}
	cm, err := wire.ParseCredential(controllerMesh)
	if err != nil {
		return err
	}
	bus, _, err := dialAndAssert(ctx, m, [2]wire.Credential{c, cm}, b.o)
	if err != nil {
		return err
	}
	return bus.Close()
}

func (b *cutoverBuses) Keep(ctx context.Context, decls []wire.Declaration) error {
	return b.guard.Set(ctx, decls)
}

func (b *cutoverBuses) Reconnect() { b.reconnect() }

// MoveEvents moves, consumer by consumer, what is left in the events
// queues on the broker onto NATS, each event as the module that emitted
// it (buses.MoveEvents).
func (b *cutoverBuses) MoveEvents(ctx context.Context, m *meshdesc.Mesh, c store.Cutover) (int, error) {
	moved := 0
	for _, n := range m.Nodes {
		for _, name := range n.Modules {
			if mod, ok := m.Module(name); !ok || len(mod.Consumes) == 0 {
				continue
			}
			doc, err := rollout.OldCredential(ctx, m, b.st, c, wire.ModuleUser(n.Name, name))
			if err != nil {
				return moved, err
			}
			consumer, err := wire.ParseCredential(doc)
			if err != nil {
				return moved, err
			}
			k, err := buses.MoveEvents(ctx, consumer, b.emitter(m), b.o.Logger)
			moved += k
			if err != nil {
				return moved, err
			}
		}
	}
	return moved, nil
}

// emitter is the credential the store holds for the module that emitted
// an event: the one on the node the event names, or, for an event that
// names none (or a node that no longer runs it), the module on the first
// node that places it.
func (b *cutoverBuses) emitter(m *meshdesc.Mesh) buses.Emitters {
	return func(ctx context.Context, node, module string) (wire.Credential, error) {
		users := []string{wire.ModuleUser(node, module)}
		for _, n := range m.Nodes {
			if slices.Contains(n.Modules, module) {
				users = append(users, wire.ModuleUser(n.Name, module))
			}
		}
		for _, u := range users {
			doc, err := b.st.Credential(ctx, u)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return wire.Credential{}, err
			}
			return wire.ParseCredential(doc)
		}
		return wire.Credential{}, fmt.Errorf("no node of the mesh runs module %s", module)
	}
}

// DrainOld says nil once what the controller's own queues on the old bus
// held (status words, dead letters) is in the store.
func (b *cutoverBuses) DrainOld(ctx context.Context) error {
	if b.both == nil {
		return errors.New("the controller is not listening on the old bus: it connects again")
	}
	return b.both.Quiet(ctx)
}

func (b *cutoverBuses) RetireOld(ctx context.Context, m *meshdesc.Mesh, c store.Cutover) error {
	return rollout.RetireAMQP(ctx, m, b.st, b.o.Apply)
}
