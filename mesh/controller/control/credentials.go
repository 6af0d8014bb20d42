package control

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// AnswerCredentials serves the hosts' requests for the credentials of
// the modules declared to their node (design 19: a credential never rides
// in a declaration), through the bus's CredentialDesk, until stop: the
// bus vouches for the node a request came from and answers that host
// alone; each credential is sealed to the key the node enrolled with. A
// node not enrolled is refused.
func AnswerCredentials(ctx context.Context, bus plane.CredentialDesk, st store.Store, log *slog.Logger) (stop func(), err error) {
	return bus.ServeCredentials(ctx, func(ctx context.Context, node string) []byte {
		actx, cancel := context.WithTimeout(ctx, saveTimeout)
		defer cancel()
		answer := credentialsFor(actx, st, node)
		if answer.Refused != "" {
			log.Warn("credentials refused", "node", node, "why", answer.Refused)
		}
		return answer.Marshal()
	})
}

// credentialsFor seals every module's credential declared to node.
func credentialsFor(ctx context.Context, st store.Reader, node string) wire.CredentialsAnswer {
	refuse := func(format string, args ...any) wire.CredentialsAnswer {
		return wire.CredentialsAnswer{Refused: fmt.Sprintf(format, args...)}
	}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		return refuse("the store cannot say: %v", err)
	}
	i := slices.IndexFunc(nodes, func(n store.Node) bool { return n.Name == node })
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
