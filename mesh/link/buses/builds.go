package buses

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqpplane"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// DialBuilder connects as the builder on the bus cred is for
// (natsplane.DialBuilder, amqpplane.DialBuilder).
func DialBuilder(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Builder, error) {
	bus, err := Of(cred)
	if err != nil {
		return nil, fmt.Errorf("connect as the builder: %w", err)
	}
	switch bus {
	case NATS:
		return natsplane.DialBuilder(ctx, cred, opts...)
	case AMQP:
		c := link.CommonOf(opts...)
		return amqpplane.DialBuilder(ctx, cred, amqpplane.HostOptions{Address: c.Address, Logger: c.Logger})
	}
	return nil, fmt.Errorf("%w: the builder on %s", plane.ErrUnsupported, bus)
}

// DialSource connects as a source repository on the bus cred is for
// (natsplane.DialSource, amqpplane.DialSource).
func DialSource(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Source, error) {
	bus, err := Of(cred)
	if err != nil {
		return nil, fmt.Errorf("connect as %s: %w", cred.User(), err)
	}
	switch bus {
	case NATS:
		return natsplane.DialSource(ctx, cred, opts...)
	case AMQP:
		c := link.CommonOf(opts...)
		return amqpplane.DialSource(ctx, cred, amqpplane.HostOptions{Address: c.Address, Logger: c.Logger})
	}
	return nil, fmt.Errorf("%w: a source repository on %s", plane.ErrUnsupported, bus)
}
