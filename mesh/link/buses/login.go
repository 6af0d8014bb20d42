package buses

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// Login dials cred's bus as its principal and closes at once: the server
// let the user in, and presented the certificate the credential pins.
// What a cutover checks of every principal before anything moves
// (docs/decisions/0013); only NATS, the bus a mesh moves to, is asked.
func Login(ctx context.Context, cred wire.Credential, opts ...link.Option) error {
	bus, err := Of(cred)
	if err != nil {
		return err
	}
	if bus != NATS {
		return fmt.Errorf("%w: a login checked on %s", plane.ErrUnsupported, bus)
	}
	nc, err := link.Dial(ctx, cred, opts...)
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}
