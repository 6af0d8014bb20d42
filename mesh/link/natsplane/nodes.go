package natsplane

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// Hear subscribes the nodes' heartbeats (core NATS, through the hosts'
// stream imports) and calls heard with each whose body names the node of
// its subject; anything else is passed over.
func (c *Controller) Hear(_ context.Context, heard func(node string, body []byte)) (stop func(), err error) {
	sub, err := c.Control.Subscribe(wire.NodeAlive("*"), func(m *nats.Msg) {
		var a struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(m.Data, &a) != nil || wire.NodeAlive(a.Node) != m.Subject {
			return
		}
		heard(a.Node, m.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("hear heartbeats: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// ServeCredentials answers the hosts' credential requests. A request
// comes on the node's own subject, which only that node's host may
// publish on, through the hosts' service import; the answer goes only to
// the reply the server made for it there (wire.CheckServiceReply), which
// leads back to that host and nowhere else. A request with any other
// reply (none crosses the import) is not answered.
func (c *Controller) ServeCredentials(ctx context.Context, answer func(ctx context.Context, node string) []byte) (stop func(), err error) {
	sub, err := c.Control.Subscribe(wire.SubjectCredentialsAll, func(m *nats.Msg) {
		node, ok := wire.NodeOfCredentials(m.Subject)
		if !ok {
			return
		}
		if err := wire.CheckServiceReply(m.Reply); err != nil {
			c.log.Warn("a credential request answered nowhere: it did not come through the hosts' service import", "node", node, "err", err)
			return
		}
		body := answer(context.WithoutCancel(ctx), node)
		if err := c.Control.Publish(m.Reply, body); err != nil {
			c.log.Warn("credentials not answered", "node", node, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("answer credential requests: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// ServeArtifacts serves nothing: on NATS a host's grant names the chunks
// of the artifacts declared to it, and it reads them from ARTIFACTS
// itself (docs/decisions/0007).
func (c *Controller) ServeArtifacts(context.Context, func(context.Context, string, string) (int64, error)) (func(), error) {
	return func() {}, nil
}
