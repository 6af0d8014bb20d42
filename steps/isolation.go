package steps

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbus/mesh/observe"
)

// amqpRecordSettles bounds the wait for the broker's record of
// connections to be whole: a refused login is named only when the broker
// closes its connection, 3 s after refusing it, and the events reach the
// harness's queue a moment after the broker's list changes.
const amqpRecordSettles = 20 * time.Second

// connectionsEver are the connections the mesh's bus has had, open or
// closed: the NATS server's /connz with state=all, or the AMQP broker's
// own record of connections, kept by the harness from the event exchange
// since the broker was raised (refused logins in it too).
func (s *scenario) connectionsEver(ctx context.Context) ([]observe.Connection, error) {
	if !s.onAMQP() {
		return s.connz(ctx, "all")
	}
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	if r.amqp == nil {
		return nil, fmt.Errorf("the mesh is on AMQP and no broker was handed over")
	}
	var conns []observe.Connection
	err = eventually(ctx, amqpRecordSettles, func(ctx context.Context) error {
		// The broker's list first: every connection it lists open was
		// opened before the events are read, so a record that lacks one
		// has missed events, and would prove nothing by what it lacks.
		open, err := s.openConnections(ctx)
		if err != nil {
			return err
		}
		events, err := r.amqp.ConnectionEvents(ctx)
		if err != nil {
			return err
		}
		read := make([]observe.AMQPEvent, len(events))
		for i, e := range events {
			read[i] = observe.AMQPEvent(e)
		}
		rec, err := observe.AMQPConnectionsEver(read)
		if err != nil {
			return err
		}
		if rec.Unsettled > 0 {
			return fmt.Errorf("the broker answered %d logins whose connections it has not yet opened or closed", rec.Unsettled)
		}
		if missing := observe.NotRecorded(open, rec); len(missing) > 0 {
			return fmt.Errorf("the broker's record of connections lacks %d of those it lists open: %+v", len(missing), missing)
		}
		conns = rec.Connections
		return nil
	})
	return conns, err
}
