package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// AnswerCredentials serves the hosts' requests for the credentials of
// the modules declared to their node (design 19: a credential never rides
// in a declaration), on nc, the control account's connection, until stop.
// A request comes on the node's own subject, which only that node's host
// may publish on, through the hosts' service import; the answer goes only
// to the reply the server made for it there, which leads back to that
// host and nowhere else, each credential sealed to the key the node
// enrolled with. A node not enrolled is refused; a request with any other
// reply (none crosses the import) is not answered.
func AnswerCredentials(ctx context.Context, nc *nats.Conn, st Store, log *slog.Logger) (stop func(), err error) {
	sub, err := nc.Subscribe(wire.SubjectCredentialsAll, func(m *nats.Msg) {
		node, ok := wire.NodeOfCredentials(m.Subject)
		if !ok {
			return
		}
		if err := wire.CheckServiceReply(m.Reply); err != nil {
			log.Warn("a credential request answered nowhere: it did not come through the hosts' service import", "node", node, "err", err)
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		answer := credentialsFor(actx, st, node)
		if answer.Refused != "" {
			log.Warn("credentials refused", "node", node, "why", answer.Refused)
		}
		if err := nc.Publish(m.Reply, answer.Marshal()); err != nil {
			log.Warn("credentials not answered", "node", node, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("answer credential requests: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// credentialsFor seals every module's credential declared to node.
func credentialsFor(ctx context.Context, st Reader, node string) wire.CredentialsAnswer {
	refuse := func(format string, args ...any) wire.CredentialsAnswer {
		return wire.CredentialsAnswer{Refused: fmt.Sprintf(format, args...)}
	}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		return refuse("the store cannot say: %v", err)
	}
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.Name == node })
	if i < 0 {
		return refuse("node %s is not enrolled", node)
	}
	pub, err := seal.ParsePublic(nodes[i].SealingKey)
	if err != nil {
		return refuse("node %s's sealing key: %v", node, err)
	}
	declared, err := st.Declared(ctx)
	if err != nil {
		return refuse("the store cannot say: %v", err)
	}
	d := slices.IndexFunc(declared, func(d wire.Declaration) bool { return d.Node == node })
	out := wire.CredentialsAnswer{Sealed: map[string][]byte{}}
	if d < 0 {
		return out
	}
	for _, mod := range declared[d].Modules {
		doc, err := st.Credential(ctx, wire.ModuleUser(node, mod))
		if err != nil {
			return refuse("module %s's credential: %v", mod, err)
		}
		if out.Sealed[mod], err = seal.To(pub, doc); err != nil {
			return refuse("seal module %s's credential: %v", mod, err)
		}
	}
	return out
}
