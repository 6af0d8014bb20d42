package rollout

import (
	"fmt"
	"slices"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// Retarget is the credential document doc pointing at bus's server at t,
// its user and password unchanged: one secret per principal serves both
// buses (docs/decisions/0010), so moving a principal is rewriting where
// its credential points. controlUsers are the users of the control
// plane's virtual host, whose AMQP URLs name it. A document already
// pointing there is returned as it is.
func Retarget(doc []byte, bus string, t store.BusTarget, controlUsers []string) ([]byte, error) {
	c, err := wire.ParseCredential(doc)
	if err != nil {
		return nil, fmt.Errorf("retarget a credential: %w", err)
	}
	user, password := c.User(), c.Password()
	switch bus {
	case wire.BusNATS:
		c.URL = wire.BusURL(user, password, t.Addr)
	case wire.BusAMQP:
		if slices.Contains(controlUsers, user) {
			c.URL = wire.AMQPControlURL(user, password, t.Addr)
		} else {
			c.URL = wire.AMQPBusURL(user, password, t.Addr)
		}
	default:
		return nil, fmt.Errorf("retarget %s's credential: bus %q: expected %s or %s", user, bus, wire.BusNATS, wire.BusAMQP)
	}
	c.Fingerprint = t.Fingerprint
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("retarget %s's credential to %s: %w", user, bus, err)
	}
	out := c.Marshal()
	if slices.Equal(out, doc) {
		return doc, nil
	}
	return out, nil
}
