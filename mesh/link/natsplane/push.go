package natsplane

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// pusher sends an operator's push as the controller's control user.
type pusher struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// DialPusher connects as cred (the controller's control user) to send
// pushes.
func DialPusher(ctx context.Context, cred wire.Credential, opts ...link.Option) (plane.Pusher, error) {
	nc, err := link.Dial(ctx, cred, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return pusher{nc: nc, js: js}, nil
}

// Push publishes body on wire.SubjectPush with id as its message id and
// returns CONTROL's sequence once the stream holds it.
func (p pusher) Push(ctx context.Context, id string, body []byte) (uint64, error) {
	ack, err := p.js.Publish(ctx, wire.SubjectPush, body, jetstream.WithMsgID(id), jetstream.WithExpectStream(wire.StreamControl))
	if err != nil {
		return 0, fmt.Errorf("send the push: %w", err)
	}
	return ack.Sequence, nil
}

func (p pusher) Close() error {
	p.nc.Close()
	return nil
}
