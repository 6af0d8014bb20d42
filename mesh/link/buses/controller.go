package buses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// ControllerOptions tune DialController.
type ControllerOptions struct {
	// Policy is what NATS's streams are asserted with; zero means
	// natsplane.DefaultPolicy.
	Policy natsplane.Policy
	// AMQP bounds what the controller asserts on RabbitMQ (its queues'
	// bounds, the events' deliveries); zero means amqpdefs's defaults.
	AMQP AMQPPolicy
	// Dial are extra bus options (a test dials another address).
	Dial []link.Option
	// Logger; default discards.
	Logger *slog.Logger
}

// DialController connects the controller with its two credentials (its
// user in the control plane, its user among the modules), on the bus
// their scheme names; both must name the same bus.
func DialController(ctx context.Context, control, mesh wire.Credential, o ControllerOptions) (plane.Controller, error) {
	bus, err := Of(control)
	if err != nil {
		return nil, err
	}
	if other, err := Of(mesh); err != nil || other != bus {
		return nil, fmt.Errorf("%w: the controller's credentials name two buses (%s is on %s, %s on %s)", plane.ErrUnsupported, control.User(), bus, mesh.User(), other)
	}
	switch bus {
	case NATS:
		return controller(natsplane.DialController(ctx, control, mesh, natsplane.ControllerOptions{Policy: o.Policy, Dial: o.Dial, Logger: o.Logger}))
	case AMQP:
		return controller(amqpplane.DialController(ctx, control, mesh, amqpplane.ControllerOptions{
			ControlPerSubject: o.AMQP.ControlPerSubject, MaxDeliver: o.AMQP.MaxDeliver, ResendEvery: o.AMQP.DeclareEvery,
			Address: link.CommonOf(o.Dial...).Address, Logger: o.Logger,
		}))
	}
	return nil, fmt.Errorf("%w: the controller on %s", plane.ErrUnsupported, bus)
}

// controller is c as a plane.Controller, and nil (not a nil *T in a
// non-nil interface) when the dial failed.
func controller[T plane.Controller](c T, err error) (plane.Controller, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// IsPermanent says whether err, from DialController or Assert, is one
// waiting cannot fix: a certificate other than the pinned one, drift the
// bus cannot correct, a bus not supported.
func IsPermanent(err error) bool {
	return errors.Is(err, plane.ErrDrift) || isFingerprint(err) || isUnsupported(err)
}

// DialPusher connects as the controller's control-plane user to send an
// operator's push.
func DialPusher(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Pusher, error) {
	bus, err := Of(cred)
	if err != nil {
		return nil, err
	}
	switch bus {
	case NATS:
		return natsplane.DialPusher(ctx, cred, opts...)
	case AMQP:
		c := link.CommonOf(opts...)
		return amqpplane.DialPusher(ctx, cred, amqpplane.HostOptions{Address: c.Address, Logger: c.Logger})
	}
	return nil, fmt.Errorf("%w: a push on %s", plane.ErrUnsupported, bus)
}

// AMQPPolicy is what the controller asserts RabbitMQ's queues with.
type AMQPPolicy struct {
	// ControlPerSubject bounds each control subject's queue.
	ControlPerSubject int
	// MaxDeliver is the deliveries an event gets before it is
	// dead-lettered.
	MaxDeliver int
	// DeclareEvery is how often every node's declaration is put again in
	// its queue; amqpplane.ResendEvery when 0.
	DeclareEvery time.Duration
}
