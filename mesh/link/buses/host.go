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

// DialHost connects as a node's host on the bus cred is for
// (natsplane.DialHost, amqpplane.DialHost).
func DialHost(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Host, error) {
	bus, err := Of(cred)
	if err != nil {
		return nil, fmt.Errorf("connect as the host: %w", err)
	}
	switch bus {
	case NATS:
		return natsplane.DialHost(ctx, cred, opts...)
	case AMQP:
		c := link.CommonOf(opts...)
		return amqpplane.DialHost(ctx, cred, amqpplane.HostOptions{Address: c.Address, Logger: c.Logger})
	}
	return nil, fmt.Errorf("%w: the host's side of the control plane on %s (%s)", plane.ErrUnsupported, bus, cred.User())
}

// Enrol claims token on the bus it is for (plane.Enroller): request is
// the claim, given the reply the implementation names, and the answer is
// returned unopened.
func Enrol(ctx context.Context, token wire.Credential, request func(reply string) []byte, opts ...link.Option) ([]byte, error) {
	bus, err := Of(token)
	if err != nil {
		return nil, fmt.Errorf("enrol: %w", err)
	}
	switch bus {
	case NATS:
		return natsplane.NewEnroller(token, opts...).Enrol(ctx, request)
	case AMQP:
		c := link.CommonOf(opts...)
		return amqpplane.NewEnroller(token, amqpplane.HostOptions{Address: c.Address, Logger: c.Logger}).Enrol(ctx, request)
	}
	return nil, fmt.Errorf("%w: enrolment on %s (%s)", plane.ErrUnsupported, bus, token.User())
}
