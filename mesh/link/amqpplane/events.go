package amqpplane

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/link/plane"
)

// The provisioner events and the dead letters are the modules' traffic,
// in the mesh's virtual host; the controller's status and dead-letter
// records are folded by position on NATS (EVENTS' and DEAD's
// sequences), which AMQP's queues do not give. Until they are folded by
// event id here (issue 19's next increment), the controller on AMQP says
// it does not follow them, and the rest of it runs.

// EventsOrigin: not on this bus yet.
func (c *Controller) EventsOrigin(context.Context) (plane.EventsOrigin, error) {
	return plane.EventsOrigin{}, fmt.Errorf("%w: the provisioner status on AMQP", plane.ErrUnsupported)
}

// FollowEvents: not on this bus yet.
func (c *Controller) FollowEvents(context.Context, func(plane.EventMsg)) (func(), error) {
	return nil, fmt.Errorf("%w: the provisioner status on AMQP", plane.ErrUnsupported)
}

// FollowDead: not on this bus yet.
func (c *Controller) FollowDead(context.Context, uint64, func(plane.Dead)) (func(), error) {
	return nil, fmt.Errorf("%w: the dead letters on AMQP", plane.ErrUnsupported)
}
