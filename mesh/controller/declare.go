package controller

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
func Declare(ctx context.Context, tx Tx, m *meshdesc.Mesh) (all []wire.Declaration, changed []string, err error) {
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
	for _, d := range Declarations(m) {
		for mod, a := range d.Artifacts {
			// The push was refused unless a build produced it (applyIn).
			b, _ := builtArtifact(builds, a.Digest)
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
		maps.Equal(a.Artifacts, b.Artifacts)
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

// declared is one node's declaration as the controller publishes it.
type declared struct {
	body, signature []byte
}

// guard keeps NODES holding, for every node, the declaration the
// controller signed, and nothing on any other subject. Within the control
// account a host can make the server write onto another node's subject
// (its report's PubAck, a JetStream API status: docs/decisions/0001):
// readers refuse what the controller did not sign for that subject
// (wire.VerifyDeclaration), and the guard puts the node's own back.
type guard struct {
	js   jetstream.JetStream
	key  ed25519.PrivateKey
	want map[string]declared // by subject
	log  *slog.Logger
	mu   sync.Mutex // one repair at a time: the sweep, the watcher, Set
}

// Guard keeps NODES holding the declarations it was last given.
type Guard struct{ g *guard }

// GuardDeclarations publishes each node's signed declaration where NODES
// does not already hold it, then watches NODES and, within moments of
// anything else landing on a node's subject, publishes that node's own
// again; a message on a subject that is no node's declaration is purged.
// It returns once the first pass is done; stop ends the watch; Set gives
// it the declarations of a push.
func GuardDeclarations(ctx context.Context, js jetstream.JetStream, key ed25519.PrivateKey, decls []wire.Declaration, log *slog.Logger) (_ *Guard, stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{js: js, key: key, log: log}
	if g.want, err = signAll(key, decls); err != nil {
		return nil, nil, err
	}
	if err := g.sweep(ctx); err != nil {
		return nil, nil, err
	}
	// DeliverLastPerSubject: what NODES holds now, then everything new,
	// and again from where it was after a reconnect (the ordered consumer
	// recreates itself).
	oc, err := js.OrderedConsumer(ctx, wire.StreamNodes, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s: %w", wire.StreamNodes, err)
	}
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		g.check(ctx, msg.Subject(), msg.Data(), msg.Headers().Get(wire.HeaderSignature))
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Warn("watching declarations", "err", err)
	}))
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s: %w", wire.StreamNodes, err)
	}
	sweepCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(sweepInterval)
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				if err := g.sweep(sweepCtx); err != nil && sweepCtx.Err() == nil {
					log.Warn("sweeping declarations", "err", err)
				}
			}
		}
	}()
	return &Guard{g}, func() {
		cancel()
		cc.Stop()
		<-done
	}, nil
}

// signAll signs every declaration, by subject.
func signAll(key ed25519.PrivateKey, decls []wire.Declaration) (map[string]declared, error) {
	out := map[string]declared{}
	for _, d := range decls {
		body, sig, err := wire.SignDeclaration(key, d)
		if err != nil {
			return nil, err
		}
		out[wire.NodeDeclare(d.Node)] = declared{body: body, signature: []byte(sig)}
	}
	return out, nil
}

// Set makes decls the declarations NODES is to hold, and publishes them
// where it does not: a node's subject that is no longer wanted is purged.
func (gd *Guard) Set(ctx context.Context, decls []wire.Declaration) error {
	g := gd.g
	want, err := signAll(g.key, decls)
	if err != nil {
		return err
	}
	g.mu.Lock()
	old := g.want
	g.want = want
	g.mu.Unlock()
	for subject := range old {
		if _, ok := want[subject]; !ok {
			if err := purgeSubject(ctx, g.js, subject); err != nil {
				return fmt.Errorf("purge %s: %w", subject, err)
			}
		}
	}
	// A sweep the JetStream API does not answer (no responders while the
	// server reloads a composition made meanwhile) is tried again at once
	// a few times: left to the periodic sweep, the push's declarations
	// would wait up to sweepInterval (a test waiting 15 s saw it).
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := g.sweep(ctx)
		if err == nil || attempt == setAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// setAttempts is how often Set sweeps before it leaves what is missing to
// the periodic sweep: 100 ms doubling, about 3 s in all.
const setAttempts = 6

// sweep checks the last message of every node's subject.
func (g *guard) sweep(ctx context.Context) error {
	st, err := g.js.Stream(ctx, wire.StreamNodes)
	if err != nil {
		return fmt.Errorf("read %s: %w", wire.StreamNodes, err)
	}
	g.mu.Lock()
	subjects := slices.Collect(maps.Keys(g.want))
	g.mu.Unlock()
	for _, subject := range subjects {
		m, err := st.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			g.check(ctx, subject, nil, "")
		case err != nil:
			return fmt.Errorf("read %s on %s: %w", subject, wire.StreamNodes, err)
		default:
			g.check(ctx, subject, m.Data, m.Header.Get(wire.HeaderSignature))
		}
	}
	return nil
}

// check repairs subject if what it holds is not the controller's current
// declaration for it.
func (g *guard) check(ctx context.Context, subject string, body []byte, signature string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	want, ok := g.want[subject]
	if !ok {
		// No node's declaration: what the server was made to write on a
		// subject of its own choosing. NODES keeps nothing but declarations.
		if err := purgeSubject(ctx, g.js, subject); err != nil {
			g.log.Error("purge a subject of NODES that is no node's declaration", "subject", subject, "err", err)
			return
		}
		g.log.Warn("purged a subject of NODES that is no node's declaration", "subject", subject)
		return
	}
	if bytes.Equal(body, want.body) && signature == string(want.signature) {
		return
	}
	if body != nil {
		g.log.Warn("declaration replaced by something the controller did not sign; restoring", "subject", subject, "bytes", len(body))
	}
	msg := &nats.Msg{Subject: subject, Header: nats.Header{wire.HeaderSignature: []string{string(want.signature)}}, Data: want.body}
	if _, err := g.js.PublishMsg(ctx, msg); err != nil {
		g.log.Error("publish declaration; the next sweep tries again", "subject", subject, "err", err)
	}
}

func purgeSubject(ctx context.Context, js jetstream.JetStream, subject string) error {
	st, err := js.Stream(ctx, wire.StreamNodes)
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(subject))
}
