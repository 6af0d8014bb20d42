package sdk

import (
	"context"

	"github.com/meshbus/mesh/mesh/sdk/internal/amqpbus"
	"github.com/meshbus/mesh/mesh/sdk/internal/natsbus"
	"github.com/meshbus/mesh/mesh/sdk/internal/transport"
)

// dialNATS is the NATS binding (tls://, nats://).
func dialNATS(ctx context.Context, cfg transport.Config) (transport.Transport, error) {
	return natsbus.Dial(ctx, cfg)
}

// dialAMQP is the AMQP binding (amqps://; amqp:// is refused for a scoped
// credential, having no certificate to pin): design 25 §1's exchanges
// mesh.events and mesh.rpc, spelled in mesh/wire/amqp.go.
func dialAMQP(ctx context.Context, cfg transport.Config) (transport.Transport, error) {
	return amqpbus.Dial(ctx, cfg)
}
