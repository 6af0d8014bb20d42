package controller

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/controller/control"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// RunOptions tune Run.
type RunOptions struct {
	// Bus tunes the connection: the bus's own policy (on NATS, what the
	// streams are asserted with), extra dial options (a test dials
	// another address). Its Logger defaults to Logger.
	Bus buses.ControllerOptions
	// StartTimeout bounds connecting and asserting while the server comes
	// up; default 60s.
	StartTimeout time.Duration
	// Logger; default discards.
	Logger *slog.Logger
	// Dir is the state directory whose nats/ the CONTROL loop composes
	// (an enrolment makes the node's user live). Without it, Run does not
	// consume CONTROL.
	Dir string
	// Apply tunes what the CONTROL loop mints and composes (rollout.Apply's
	// options); its Logger defaults to Logger.
	Apply rollout.Options
	// LiveEvery is how often a mesh on AMQP has its users and grants made
	// live again and the compatibility broker is observed; default
	// rollout.LiveEvery.
	LiveEvery time.Duration
}

func (o RunOptions) withDefaults() RunOptions {
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LiveEvery == 0 {
		o.LiveEvery = rollout.LiveEvery
	}
	if o.Apply.Logger == nil {
		o.Apply.Logger = o.Logger
	}
	if o.Bus.Logger == nil {
		o.Bus.Logger = o.Logger
	}
	return o
}

// Run composes the store's state into nats.conf (given a Dir), connects
// as the controller, asserts the streams and consumers,
// publishes every node's declaration and guards them (rollout.GuardDeclarations),
// logs "ready", and folds the provisioner events into the status
// (status.FollowStatus) and handles CONTROL (control.FollowControl, given a Dir) until
// ctx ends, when it returns nil. Drift the server cannot correct is
// returned (wrapping ErrDrift) before "ready" is ever logged. Its state
// (the declaration key, its credentials, the status, the declarations) is
// st's. The description it runs is the one last pushed (rollout.Push), or m
// before the first push.
func Run(ctx context.Context, m *meshdesc.Mesh, st store.Store, o RunOptions) error {
	o = o.withDefaults()
	m, err := rollout.Described(ctx, m, st)
	if err != nil {
		return err
	}
	var decls []wire.Declaration
	if err := st.Update(ctx, func(tx store.Tx) error {
		var err error
		decls, _, err = rollout.Declare(ctx, tx, m)
		return err
	}); err != nil {
		return fmt.Errorf("declare: %w", err)
	}
	if o.Dir != "" {
		// The CONTROL loop acknowledges an enrolment once it is answered
		// and composes it a moment later: what a controller stopped in
		// between left uncomposed is made live here. On AMQP the broker
		// may still be starting: its management API is waited for.
		startCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
		err := retry(startCtx, o.Logger, func(ctx context.Context) (bool, error) {
			_, err := rollout.Apply(ctx, m, st, o.Dir, o.Apply)
			return errors.Is(err, rollout.ErrNotLive), err
		})
		cancel()
		if err != nil {
			return fmt.Errorf("compose: %w", err)
		}
	}
	key, err := st.DeclarationKey(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w (a state from before declarations were signed: run apply once to mint it)", store.ErrNoGenesis, err)
	}
	if err != nil {
		return err
	}
	stopLive := keepLive(ctx, m, st, o)
	defer stopLive()
	for {
		err := serve(ctx, m, st, key, decls, o)
		if err != nil && ctx.Err() != nil {
			// Stopped while it connected: what failed is the stop's doing.
			o.Logger.Info("stopping", "why", context.Cause(ctx), "while", err)
			return nil
		}
		if !errors.Is(err, errReconnect) {
			return err
		}
		// A cutover changed the buses the controller listens on: it
		// connects again, as a controller started now would.
		if decls, err = st.Declared(ctx); err != nil {
			return err
		}
		o.Logger.Info("connecting again: the cutover changed the buses")
	}
}

// errReconnect ends serve when a cutover's phase changes the buses the
// controller is to listen on.
var errReconnect = errors.New("the cutover changed the buses")

// serve connects to the buses the store says the controller listens on
// (the mesh's; and while a cutover switches, the one it moves from too,
// for the nodes not moved yet), serves them until ctx ends (nil) or the
// cutover changes them (errReconnect), and steps a cutover in progress.
func serve(ctx context.Context, m *meshdesc.Mesh, st store.Store, key ed25519.PrivateKey, decls []wire.Declaration, o RunOptions) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	bus, rep, err := Start(ctx, m, st, o)
	if err != nil {
		return err
	}
	defer bus.Close()
	on, err := rollout.MeshBus(ctx, st)
	if err != nil {
		return err
	}
	old, err := oldBus(ctx, m, st, o)
	if err != nil {
		return err
	}
	if old != nil {
		defer old.Close()
	}
	// While a cutover moves the mesh, the controller hears both buses.
	var hearing interface {
		plane.StatusFeed
		plane.HeartbeatFeed
	} = bus
	var both *listening
	if old != nil {
		both = newListening(bus, old, o.Logger)
		hearing = both
		stopOld, err := both.follow(ctx, st)
		if err != nil {
			return err
		}
		defer stopOld()
	} else {
		stopFollowing, err := status.FollowStatus(ctx, bus, st, o.Logger)
		if err != nil {
			return fmt.Errorf("follow status: %w", err)
		}
		defer stopFollowing()
	}
	for _, b := range withOld(bus, old) {
		stopAnswering, err := control.AnswerCredentials(ctx, b, st, o.Logger)
		if err != nil {
			return err
		}
		defer stopAnswering()
		stopServing, err := control.ServeArtifacts(ctx, b, st, o.Logger)
		if err != nil {
			return fmt.Errorf("serve artifacts: %w", err)
		}
		defer stopServing()
	}
	stopDead, err := status.FollowDead(ctx, bus, st, o.Logger)
	if err != nil {
		return fmt.Errorf("follow the dead letters: %w", err)
	}
	defer stopDead()
	stopListening, err := status.ListenLiveness(ctx, hearing, st, o.Logger)
	if err != nil {
		return fmt.Errorf("listen to heartbeats: %w", err)
	}
	defer stopListening()
	guard, stopGuarding, err := rollout.GuardDeclarations(ctx, bus, key, decls, o.Logger)
	if err != nil {
		return fmt.Errorf("guard declarations: %w", err)
	}
	defer stopGuarding()
	if old != nil {
		stopOld, err := guard.Also(ctx, old)
		if err != nil {
			return fmt.Errorf("guard declarations on the bus the cutover moves from: %w", err)
		}
		defer stopOld()
	}
	if o.Dir != "" {
		_, stopControl, err := control.FollowControl(ctx, bus, m, st, o.Dir, o.Apply, guard, string(on))
		if err != nil {
			return fmt.Errorf("follow CONTROL: %w", err)
		}
		defer stopControl()
		if old != nil {
			_, stopOld, err := control.FollowControl(ctx, old, m, st, o.Dir, o.Apply, guard, wire.BusAMQP)
			if err != nil {
				return fmt.Errorf("follow CONTROL on the bus the cutover moves from: %w", err)
			}
			defer stopOld()
		}
	}
	stopCutover := driveCutover(ctx, m, st, o, guard, both, func() { cancel(errReconnect) })
	defer stopCutover()
	o.Logger.Info("ready", "bus", on, "also", old != nil, "created", len(rep.Created), "corrected", len(rep.Corrected), "deleted", len(rep.Deleted))
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errReconnect) {
		return errReconnect
	}
	o.Logger.Info("stopping", "why", context.Cause(ctx))
	return nil
}

// keepLive makes the store's users and grants live on the broker of a
// mesh on AMQP every o.LiveEvery (rollout.LiveAMQP): a composition
// the broker did not take (its management API away for a moment) is made
// live once it answers, and a user changed on the broker by hand is put
// back; and the configuration of a server adopted beside it is the
// store's composition (rollout.KeepAdopted), on either bus: a mesh a
// cutover moved to the adopted server still writes its configuration
// there, and still observes the compatibility broker until it retires.
// On NATS LiveAMQP does nothing: nats.conf is the composition.
func keepLive(ctx context.Context, m *meshdesc.Mesh, st store.Store, o RunOptions) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	// An adoption stopped after its commit is completed here, and the
	// compatibility broker's clients are counted, at once and every time
	// after.
	tendBeside := func() {
		if err := rollout.ObserveCompat(ctx, m, st, o.Apply); err != nil && ctx.Err() == nil {
			o.Logger.Warn("observe the compatibility broker's clients", "err", err)
		}
		if o.Dir == "" {
			return
		}
		if err := rollout.KeepAdopted(ctx, st, o.Dir, o.Apply); err != nil && ctx.Err() == nil {
			o.Logger.Warn("keep the adopted server's configuration", "err", err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tendBeside()
		t := time.NewTicker(o.LiveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := rollout.LiveAMQP(ctx, m, st, o.Apply); err != nil && ctx.Err() == nil {
				o.Logger.Warn("make the broker's users live", "err", err)
			}
			tendBeside()
		}
	}()
	return func() { cancel(); <-done }
}

// Start connects with the controller's two credentials held in st, on
// the bus they name, retrying with backoff while the bus comes up, and
// asserts what the description needs on it (streams and consumers;
// exchanges and queues). Transient failures are retried within
// StartTimeout; drift that cannot be corrected and a wrong certificate
// are not, since waiting cannot fix them.
func Start(ctx context.Context, m *meshdesc.Mesh, st store.Store, o RunOptions) (plane.Controller, Report, error) {
	o = o.withDefaults()
	var creds [2]wire.Credential
	for i, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		c, err := store.ControllerCredential(ctx, st, user)
		if err != nil {
			return nil, Report{}, err
		}
		creds[i] = c
	}
	return dialAndAssert(ctx, m, creds, o)
}

// dialAndAssert connects as the controller with creds (its two users'),
// retrying as Start says, and asserts what m needs on that bus.
func dialAndAssert(ctx context.Context, m *meshdesc.Mesh, creds [2]wire.Credential, o RunOptions) (plane.Controller, Report, error) {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()

	var bus plane.Controller
	var rep Report
	err := retry(ctx, o.Logger, func(ctx context.Context) (bool, error) {
		if bus == nil {
			b, err := buses.DialController(ctx, creds[0], creds[1], o.Bus)
			if err != nil {
				return !buses.IsPermanent(err), err
			}
			bus = b
		}
		var err error
		rep, err = bus.Assert(ctx, m)
		if err != nil {
			return !buses.IsPermanent(err), err
		}
		return false, nil
	})
	if err != nil {
		if bus != nil {
			_ = bus.Close()
		}
		return nil, Report{}, err
	}
	return bus, rep, nil
}

// Report says what one assertion changed on the bus.
type Report = plane.Asserted

// retry calls f until it succeeds, says its error is permanent, or ctx
// ends, doubling the pause between attempts up to a ceiling.
func retry(ctx context.Context, log *slog.Logger, f func(context.Context) (retryable bool, err error)) error {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		retryable, err := f(ctx)
		if err == nil {
			return nil
		}
		if !retryable {
			return err
		}
		log.Warn("start attempt failed; retrying", "attempt", attempt, "err", err, "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("start within the deadline: %w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// ErrDrift is wrapped by Start's refusal of an object on the bus that
// differs from what the mesh needs on a field the bus cannot update.
var ErrDrift = plane.ErrDrift
