package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/bus"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// RunOptions tune Run.
type RunOptions struct {
	// Policy is what the streams are asserted with; zero means
	// DefaultPolicy.
	Policy Policy
	// StartTimeout bounds connecting and asserting while the server comes
	// up; default 60s.
	StartTimeout time.Duration
	// Dial are extra bus options (a test dials another address).
	Dial []bus.Option
	// Logger; default discards.
	Logger *slog.Logger
}

func (o RunOptions) withDefaults() RunOptions {
	if o.Policy == (Policy{}) {
		o.Policy = DefaultPolicy()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run connects as the controller, asserts the streams and consumers, logs
// "ready", and folds the provisioner events into the status
// (FollowStatus) until ctx ends, when it returns nil.
// Drift the server cannot correct is returned (wrapping ErrDrift) before
// "ready" is ever logged.
func Run(ctx context.Context, m *meshdesc.Mesh, dir string, o RunOptions) error {
	o = o.withDefaults()
	nc, rep, err := Start(ctx, m, dir, o)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("open jetstream: %w", err)
	}
	stopFollowing, err := FollowStatus(ctx, js, dir, o.Logger)
	if err != nil {
		return fmt.Errorf("follow status: %w", err)
	}
	o.Logger.Info("ready", "created", len(rep.Created), "corrected", len(rep.Corrected), "deleted", len(rep.Deleted))
	<-ctx.Done()
	stopFollowing()
	o.Logger.Info("stopping", "why", context.Cause(ctx))
	return nil
}

// Start connects with the state directory's controller credential,
// retrying with backoff while the server comes up, and asserts the
// desired streams and consumers. Transient failures are retried within
// StartTimeout; drift that cannot be corrected and a wrong certificate
// are not, since waiting cannot fix them.
func Start(ctx context.Context, m *meshdesc.Mesh, dir string, o RunOptions) (*nats.Conn, Report, error) {
	o = o.withDefaults()
	cred, err := loadControllerCredential(dir)
	if err != nil {
		return nil, Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	desired := DesiredState(m, o.Policy)

	var nc *nats.Conn
	var rep Report
	err = retry(ctx, o.Logger, func(ctx context.Context) (bool, error) {
		if nc == nil {
			c, err := bus.Dial(ctx, cred, append(connOptions(o.Logger), o.Dial...)...)
			if err != nil {
				return !errors.Is(err, bus.ErrFingerprint), fmt.Errorf("connect: %w", err)
			}
			nc = c
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return false, fmt.Errorf("open jetstream: %w", err)
		}
		rep, err = Assert(ctx, js, desired, o.Logger)
		if err != nil {
			return !errors.Is(err, ErrDrift), err
		}
		return false, nil
	})
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		return nil, Report{}, err
	}
	return nc, rep, nil
}

// connOptions keep the controller's connection for its whole life: it
// reconnects forever, since the bus coming back is the only way forward,
// and says so in the log.
func connOptions(log *slog.Logger) []bus.Option {
	return []bus.Option{
		bus.WithName("mesh-controller"),
		bus.WithNATSOptions(
			nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected from the bus", "err", err) }),
			nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to the bus", "server", nc.ConnectedUrlRedacted()) }),
		),
	}
}

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

func loadControllerCredential(dir string) (wire.Credential, error) {
	path := Layout{dir}.Credential(wire.ControllerUser)
	data, err := os.ReadFile(path)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("%w: read controller credential: %v", ErrNoGenesis, err)
	}
	cred, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read controller credential %s: %w", path, err)
	}
	if cred.Principal != wire.PrincipalController {
		return wire.Credential{}, fmt.Errorf("read controller credential %s: principal is %q, expected %q", path, cred.Principal, wire.PrincipalController)
	}
	return cred, nil
}
