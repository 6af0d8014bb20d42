package sdk

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/sdk/internal/natsbus"
	"github.com/meshbus/mesh/mesh/sdk/internal/transport"
)

// dialNATS is the NATS binding (tls://, nats://).
func dialNATS(ctx context.Context, cfg transport.Config) (transport.Transport, error) {
	return natsbus.Dial(ctx, cfg)
}

// dialAMQP is the AMQP binding (amqp://, amqps://). The binding is written
// separately (design 25 §1: exchanges mesh.events and mesh.rpc); its
// author replaces this body with a call to its Dialer, implementing
// internal/transport.Transport.
func dialAMQP(_ context.Context, cfg transport.Config) (transport.Transport, error) {
	return nil, fmt.Errorf("%w: the AMQP binding is not linked in (credential for %s)", ErrTransport, cfg.Credential.Module)
}
