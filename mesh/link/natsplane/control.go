package natsplane

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// defaultDuplicates is the server's duplicate window of a stream that
// sets none.
const defaultDuplicates = 2 * time.Minute

// Consume binds the controller's consumer on CONTROL (wire.ControlConsumer,
// explicit ack) and hands deliver each message, at most max pulled at
// once. stop uses Stop, not Drain: a drain waits for the server, which
// may be gone; what the client pulled and did not hand over comes again
// after CONTROL's ack wait.
func (c *Controller) Consume(ctx context.Context, max int, deliver func(plane.ControlMsg)) (stop func(), err error) {
	cons, err := c.jsControl.Consumer(ctx, wire.StreamControl, wire.ControlConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s on %s: %w", wire.ControlConsumer, wire.StreamControl, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { deliver(controlMsg{msg}) },
		jetstream.PullMaxMessages(max),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			c.log.Warn("control consumer", "err", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", wire.ControlConsumer, wire.StreamControl, err)
	}
	return func() {
		cc.Stop()
		<-cc.Closed()
	}, nil
}

// controlMsg is a CONTROL delivery.
type controlMsg struct{ m jetstream.Msg }

func (m controlMsg) Subject() string { return m.m.Subject() }
func (m controlMsg) ID() string      { return m.m.Headers().Get(jetstream.MsgIDHeader) }
func (m controlMsg) Data() []byte    { return m.m.Data() }

// Position is the message's CONTROL sequence; 0 if the delivery carries
// no metadata (it always does from a consumer).
func (m controlMsg) Position() uint64 {
	meta, err := m.m.Metadata()
	if err != nil {
		return 0
	}
	return meta.Sequence.Stream
}

func (m controlMsg) Attempt() int {
	meta, err := m.m.Metadata()
	if err != nil {
		return 0
	}
	return int(meta.NumDelivered)
}

func (m controlMsg) Ack(ctx context.Context) error  { return m.m.DoubleAck(ctx) }
func (m controlMsg) AckLater() error                { return m.m.Ack() }
func (m controlMsg) Hold(delay time.Duration) error { return m.m.NakWithDelay(delay) }
func (m controlMsg) Term(reason string) error       { return m.m.TermWithReason(reason) }

// Prunable reads from CONTROL what the ledger may forget: the sequence
// below which no message is left in the stream, and its duplicate window.
func (c *Controller) Prunable(ctx context.Context) (below uint64, window time.Duration, err error) {
	s, err := c.jsControl.Stream(ctx, wire.StreamControl)
	if err != nil {
		return 0, 0, fmt.Errorf("read stream %s: %w", wire.StreamControl, err)
	}
	info := s.CachedInfo()
	below = info.State.FirstSeq
	if info.State.Msgs == 0 {
		below = info.State.LastSeq + 1
	}
	window = info.Config.Duplicates
	if window <= 0 {
		window = defaultDuplicates
	}
	return below, window, nil
}
