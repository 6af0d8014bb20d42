package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/meshbus/mesh/mesh/controller/rollout"
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
	next, err := nextCredentials(ctx, st, pub, declared[d])
	if err != nil {
		return refuse("the credentials on the bus the cutover moves to: %v", err)
	}
	out.Next = next
	return out
}

// nextCredentials are the node's credentials on the bus a cutover in
// progress moves it to, sealed to it; nil with none in progress, or
// none that moves the node. They are the store's own documents pointing
// there (rollout.Retarget): the same users and passwords, so nothing is
// composed for them, and nothing of them travels in a declaration.
func nextCredentials(ctx context.Context, st store.Reader, pub *[seal.KeySize]byte, d wire.Declaration) (*wire.NextCredentials, error) {
	c, err := st.Cutover(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, ok := c.Nodes[d.Node]; !ok || c.Phase.Ended() || c.Phase == store.CutoverCompose {
		return nil, nil
	}
	next := &wire.NextCredentials{Generation: c.Generation, Bus: c.To, Sealed: map[string][]byte{}}
	sealed := func(user string) ([]byte, error) {
		doc, err := st.Credential(ctx, user)
		if err != nil {
			return nil, fmt.Errorf("%s's credential: %w", user, err)
		}
		if doc, err = rollout.Retarget(doc, c.To, c.Target, nil); err != nil {
			return nil, err
		}
		return seal.To(pub, doc)
	}
	if next.Host, err = sealed(wire.HostUser(d.Node)); err != nil {
		return nil, err
	}
	for _, mod := range d.Modules {
		if next.Sealed[mod], err = sealed(wire.ModuleUser(d.Node, mod)); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// ServeArtifacts lets each host have the artifacts its node's newest
// declaration names, through the bus's ArtifactDesk, until stop: on a bus
// that cannot narrow a host's reads (AMQP), the controller is the deputy
// that copies them, and asks here first.
func ServeArtifacts(ctx context.Context, bus plane.ArtifactDesk, st store.Reader, log *slog.Logger) (stop func(), err error) {
	return bus.ServeArtifacts(ctx, func(ctx context.Context, node, digest string) (int64, error) {
		actx, cancel := context.WithTimeout(ctx, saveTimeout)
		defer cancel()
		size, err := artifactDeclared(actx, st, node, digest)
		if err != nil {
			log.Warn("artifact refused", "node", node, "digest", digest, "why", err)
		}
		return size, err
	})
}

// artifactDeclared is the size of the artifact of digest if node's
// declaration names it.
func artifactDeclared(ctx context.Context, st store.Reader, node, digest string) (int64, error) {
	declared, err := st.Declared(ctx)
	if err != nil {
		return 0, fmt.Errorf("the store cannot say: %w", err)
	}
	d := slices.IndexFunc(declared, func(d wire.Declaration) bool { return d.Node == node })
	if d < 0 {
		return 0, fmt.Errorf("node %s has no declaration", node)
	}
	for _, a := range declared[d].Artifacts {
		if a.Digest == digest {
			return a.Size, nil
		}
	}
	return 0, fmt.Errorf("node %s's declaration names no artifact %s", node, digest)
}
