package sdk

import (
	"context"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqplink"
	"github.com/meshbus/mesh/mesh/link/natslink"
)

// dialNATS is the NATS binding (tls://, nats://).
func dialNATS(ctx context.Context, cfg link.Config) (link.Transport, error) {
	return natslink.Dial(ctx, cfg)
}

// dialAMQP is the AMQP binding (amqps://; amqp:// is refused for a scoped
// credential, having no certificate to pin): design 25 §1's exchanges
// mesh.events and mesh.rpc, spelled in mesh/wire/amqp.go.
func dialAMQP(ctx context.Context, cfg link.Config) (link.Transport, error) {
	return amqplink.Dial(ctx, cfg)
}
