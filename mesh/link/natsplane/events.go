package natsplane

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// EventsOrigin is when EVENTS was created and its last sequence.
func (c *Controller) EventsOrigin(ctx context.Context) (plane.EventsOrigin, error) {
	stream, err := c.jsMesh.Stream(ctx, wire.StreamEvents)
	if err != nil {
		return plane.EventsOrigin{}, fmt.Errorf("read stream %s: %w", wire.StreamEvents, err)
	}
	info := stream.CachedInfo()
	return plane.EventsOrigin{Created: info.Created, Last: info.State.LastSeq}, nil
}

// FollowEvents binds the controller's status consumer on EVENTS
// (wire.StatusConsumer) and hands deliver one event at a time.
func (c *Controller) FollowEvents(ctx context.Context, deliver func(plane.EventMsg)) (stop func(), err error) {
	cons, err := c.jsMesh.Consumer(ctx, wire.StreamEvents, wire.StatusConsumer)
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s on %s: %w", wire.StatusConsumer, wire.StreamEvents, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { deliver(eventMsg{msg}) }, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		c.log.Warn("status consumer", "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", wire.StatusConsumer, wire.StreamEvents, err)
	}
	return func() {
		cc.Stop()
		<-cc.Closed()
	}, nil
}

type eventMsg struct{ m jetstream.Msg }

func (m eventMsg) Position() uint64 {
	meta, err := m.m.Metadata()
	if err != nil {
		return 0
	}
	return meta.Sequence.Stream
}
func (m eventMsg) Subject() string                { return m.m.Subject() }
func (m eventMsg) Header() map[string][]string    { return m.m.Headers() }
func (m eventMsg) Data() []byte                   { return m.m.Data() }
func (m eventMsg) Ack(ctx context.Context) error  { return m.m.DoubleAck(ctx) }
func (m eventMsg) Hold(delay time.Duration) error { return m.m.NakWithDelay(delay) }
func (m eventMsg) Term() error                    { return m.m.Term() }

// FollowDead reads DEAD with an ordered consumer (the controller acks
// nothing there) from the sequence after after, each max-deliveries
// advisory with the event it names read from EVENTS while it still holds
// it. A letter deliver did not record stays in DEAD, after the position
// the next follower is given: nothing here takes it back.
func (c *Controller) FollowDead(ctx context.Context, after uint64, deliver func(plane.Dead) error) (stop func(), err error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1}
	}
	oc, err := c.jsMesh.OrderedConsumer(ctx, wire.StreamDead, cfg)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", wire.StreamDead, err)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		a, err := wire.ParseMaxDeliveries(msg.Data())
		if err != nil {
			c.log.Warn("DEAD holds something that is not a dead letter; passed", "seq", meta.Sequence.Stream, "err", err)
			return
		}
		d := plane.Dead{Position: meta.Sequence.Stream, Consumer: a.Consumer, EventPos: a.StreamSeq, Deliveries: a.Deliveries, At: meta.Timestamp}
		if ev, err := c.jsMesh.Stream(fctx, wire.StreamEvents); err == nil {
			if m, err := ev.GetMsg(fctx, a.StreamSeq); err == nil {
				d.Subject, d.EventID = m.Subject, m.Header.Get(wire.HeaderEventID)
			}
		}
		_ = deliver(d)
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		c.log.Warn("reading DEAD", "err", err)
	}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("read %s: %w", wire.StreamDead, err)
	}
	return func() {
		cancel()
		cc.Stop()
		<-cc.Closed()
	}, nil
}
