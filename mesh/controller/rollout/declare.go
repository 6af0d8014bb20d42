package rollout

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// sweepInterval is how often the guard checks every declaration even when
// the stream told it nothing: a restore whose publish failed is retried.
const sweepInterval = 30 * time.Second

// Declarations are the declaration of every node of m: the modules
// assigned to it, their versions and the configuration derived for them
// (the catalogue's module is given the catalogue), at revision 0
// (Declare numbers them).
func Declarations(m *meshdesc.Mesh) []wire.Declaration {
	out := make([]wire.Declaration, 0, len(m.Nodes))
	for _, n := range m.Nodes {
		d := wire.Declaration{Node: n.Name, Modules: append([]string{}, n.Modules...)}
		for _, name := range n.Modules {
			if mod, ok := m.Module(name); ok && mod.Version != "" {
				if d.Versions == nil {
					d.Versions = map[string]string{}
				}
				d.Versions[name] = mod.Version
			}
			if mod, ok := m.Module(name); ok && mod.Artifact != "" {
				if d.Artifacts == nil {
					d.Artifacts = map[string]wire.Artifact{}
				}
				d.Artifacts[name] = wire.Artifact{Digest: mod.Artifact}
			}
			if name == wire.CatalogSeat && m.HasCatalogue() {
				d.Config = map[string]json.RawMessage{name: m.Catalogue().Marshal()}
			}
		}
		out = append(out, d)
	}
	return out
}

// Declare makes m's declarations the ones tx holds: a node whose
// declaration changed (or is new) gets the next revision, one unchanged
// keeps its own, and a node no longer in m loses its declaration. It
// returns every node's declaration as now held, and the nodes whose
// declaration changed.
func Declare(ctx context.Context, tx store.Tx, m *meshdesc.Mesh) (all []wire.Declaration, changed []string, err error) {
	held, err := tx.Declared(ctx)
	if err != nil {
		return nil, nil, err
	}
	byNode := map[string]wire.Declaration{}
	for _, d := range held {
		byNode[d.Node] = d
	}
	builds, err := tx.Builds(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A cutover in progress asks its nodes to move (moveOf).
	cut, err := tx.Cutover(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}
	for _, d := range Declarations(m) {
		d.Move = moveOf(cut, d.Node)
		for mod, a := range d.Artifacts {
			// The push was refused unless a build produced it (applyIn).
			b, _ := store.BuiltArtifact(builds, a.Digest)
			d.Artifacts[mod] = wire.Artifact{Digest: a.Digest, Size: b.Size}
		}
		old, ok := byNode[d.Node]
		delete(byNode, d.Node)
		if ok && sameDeclaration(old, d) {
			all = append(all, old)
			continue
		}
		d.Revision = old.Revision + 1
		if err := tx.PutDeclared(ctx, d); err != nil {
			return nil, nil, err
		}
		all, changed = append(all, d), append(changed, d.Node)
	}
	for node := range byNode {
		if err := tx.DeleteDeclared(ctx, node); err != nil {
			return nil, nil, err
		}
		changed = append(changed, node)
	}
	return all, changed, nil
}

// sameDeclaration compares what a node is to run, not the revision.
func sameDeclaration(a, b wire.Declaration) bool {
	return slices.Equal(a.Modules, b.Modules) && maps.Equal(a.Versions, b.Versions) && maps.EqualFunc(a.Config, b.Config, sameDocument) &&
		maps.Equal(a.Artifacts, b.Artifacts) && (a.Move == nil) == (b.Move == nil) && (a.Move == nil || *a.Move == *b.Move)
}

// sameDocument compares two documents by what they say: a store may keep JSON
// in its own spelling (PostgreSQL's jsonb orders keys and spaces them).
func sameDocument(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// Guard keeps each node's newest declaration on the bus, signed with the
// controller's key (the bus's DeclarationKeeper: on NATS it also watches
// NODES and puts back what anything else wrote there).
type Guard struct {
	key ed25519.PrivateKey

	mu      sync.Mutex
	keepers []plane.Keeper
	signed  []plane.SignedDeclaration
}

// GuardDeclarations signs decls and has the bus keep them; it returns
// once the first pass is done; stop ends the keeping; Set gives it the
// declarations of a push.
func GuardDeclarations(ctx context.Context, bus plane.DeclarationKeeper, key ed25519.PrivateKey, decls []wire.Declaration, log *slog.Logger) (_ *Guard, stop func(), err error) {
	signed, err := signAll(key, decls)
	if err != nil {
		return nil, nil, err
	}
	k, err := bus.Keep(ctx, signed)
	if err != nil {
		return nil, nil, err
	}
	return &Guard{key: key, keepers: []plane.Keeper{k}, signed: signed}, k.Stop, nil
}

// Also keeps the same declarations on another bus too, until stop: while
// a cutover switches, a node not moved yet reads them on the old bus.
func (g *Guard) Also(ctx context.Context, bus plane.DeclarationKeeper) (stop func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k, err := bus.Keep(ctx, g.signed)
	if err != nil {
		return nil, err
	}
	g.keepers = append(g.keepers, k)
	return func() {
		g.mu.Lock()
		g.keepers = slices.DeleteFunc(g.keepers, func(x plane.Keeper) bool { return x == k })
		g.mu.Unlock()
		k.Stop()
	}, nil
}

// Set makes decls the declarations kept, on every bus.
func (g *Guard) Set(ctx context.Context, decls []wire.Declaration) error {
	signed, err := signAll(g.key, decls)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.signed = signed
	var errs []error
	for _, k := range g.keepers {
		errs = append(errs, k.Set(ctx, signed))
	}
	return errors.Join(errs...)
}

// signAll signs every declaration (wire.SignDeclaration).
func signAll(key ed25519.PrivateKey, decls []wire.Declaration) ([]plane.SignedDeclaration, error) {
	out := make([]plane.SignedDeclaration, 0, len(decls))
	for _, d := range decls {
		body, sig, err := wire.SignDeclaration(key, d)
		if err != nil {
			return nil, err
		}
		out = append(out, plane.SignedDeclaration{Node: d.Node, Body: body, Signature: sig})
	}
	return out, nil
}
