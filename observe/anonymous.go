package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
)

// DialAnonymous connects to the bus at address with no user and no
// password, over TLS with the server's certificate pinned and its name
// checked as every principal's is, so that what it meets is the server's
// answer to a client without a user rather than a TLS failure. The mesh
// admits no such client: a nil error means the bus is open.
func DialAnonymous(ctx context.Context, fingerprint, serverName, address string) (*nats.Conn, error) {
	timeout := link.DefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	nc, err := nats.Connect("tls://"+address,
		nats.Name("anonymous"),
		nats.Secure(link.PinnedTLS(fingerprint, serverName)),
		nats.Timeout(timeout),
		nats.NoReconnect(),
	)
	if err != nil {
		return nil, fmt.Errorf("dial bus at %s without a user: %w", address, err)
	}
	return nc, nil
}
