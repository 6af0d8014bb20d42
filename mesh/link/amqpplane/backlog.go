package amqpplane

import (
	"context"
	"fmt"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// Backlog is how many messages the controller's own queues in the mesh's
// virtual host hold ready, not yet handed to it: its status queue and the
// dead letters'. A cutover retires the broker's mesh side only once both
// are empty and what they handed over is recorded (the caller counts
// that), since removing the virtual host removes what they still hold.
// A message handed over and not yet settled is not counted here: the
// broker's passive declare says only what waits.
func (c *Controller) Backlog(ctx context.Context) (int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
	}
	ch, err := c.Mesh.Channel(ctx)
	if err != nil {
		return 0, fmt.Errorf("count the controller's queues: %w", err)
	}
	defer func() { _ = ch.Close() }()
	waiting := 0
	for _, queue := range []string{wire.QueueStatus, wire.QueueDead} {
		err := amqpconn.Bounded(ctx, ch, func() error {
			// A passive declare needs no permission and changes nothing.
			q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			waiting += q.Messages
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("count what %s holds: %w", queue, amqpconn.MapClosed(err))
		}
	}
	return waiting, nil
}

var _ plane.Backlog = (*Controller)(nil)
