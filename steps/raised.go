package steps

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/topology"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// raised is one cluster and what the steps need to know of it.
type raised struct {
	meshFile string
	key      string // the world's key: the description and the topology
	mesh     *meshdesc.Mesh
	session  session
	cluster  harness.Mesh
	// describe is the cluster's Describe: how to reach it and remove it.
	describe func() string
	poll     time.Duration
	// amqp is the AMQP broker raised with the cluster or beside its NATS
	// bus, once asked for (raiseAMQP).
	amqp harness.AMQPBroker
	// tainted is set by a step that changes the cluster in a way a later
	// scenario could notice (a message stored, a user revoked) and no reset
	// puts back.
	tainted bool
	// asRaised is the cluster read when a scenario of a feature sharing
	// clusters first leased it, for a reset to be checked against
	// (reset.go); nil until then.
	asRaised *asRaised
	// narration carries the harness's narration of the cluster to the
	// scenario holding it.
	narration *relay
}

// relay passes what is written to it on to the scenario that holds the
// cluster (beds.Narration), or to the run's output while none does: the
// harness narrates through the writer its session was made with, and the
// cluster outlives the scenario that raised it.
type relay struct {
	mu       sync.Mutex
	current  io.Writer
	fallback io.Writer
}

// to sends the narration to w from now on; nil: to the run's output.
func (l *relay) to(w io.Writer) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current = w
}

func (l *relay) Write(b []byte) (int, error) {
	l.mu.Lock()
	w := cmp.Or(l.current, l.fallback)
	l.mu.Unlock()
	return w.Write(b)
}

// session is what the World does with a cluster's harness.Session: keep
// it up (--keep, --fail-fast) or end it.
type session interface {
	ID() string
	Keep() error
	Close(context.Context) error
}

// raise raises a cluster from the description; if that fails, the
// containers' logs are saved into logDir (when set) before teardown.
func raise(ctx context.Context, opts Options, ensured *images.Ensured, pool *harness.Pool, meshFile string, top topology.Topology, logDir string) (*raised, error) {
	m, err := meshdesc.Load(meshFile)
	if err != nil {
		return nil, err
	}
	narration := &relay{fallback: opts.Out}
	narration.to(beds.Narration(ctx))
	s, err := harness.NewSession(ctx, harness.SessionOptions{Root: opts.Root, Out: narration, Images: ensured, Pool: pool})
	if err != nil {
		return nil, err
	}
	c, err := s.RaiseGenesis(ctx, harness.GenesisOptions{MeshFile: meshFile, Poll: opts.Poll, Topology: top})
	if err != nil {
		if logDir != "" {
			_ = s.SaveLogs(context.WithoutCancel(ctx), logDir)
		}
		closeErr := s.Close(context.WithoutCancel(ctx))
		if closeErr != nil {
			return nil, fmt.Errorf("%w (and tearing down: %v)", err, closeErr)
		}
		return nil, err
	}
	return &raised{meshFile: meshFile, mesh: m, session: s, cluster: c, describe: c.Describe, poll: opts.Poll, narration: narration}, nil
}

// capability is the cluster's optional capability T (harness.StoreQuerier,
// harness.NATSConfig, harness.AMQPRaiser, harness.ModuleRunner), or an
// error naming the capability when the cluster raised lacks it: a step
// that needs one asks for it here rather than assuming every Mesh has it.
func capability[T any](r *raised) (T, error) {
	c, ok := r.cluster.(T)
	if !ok {
		var none T
		return none, fmt.Errorf("the cluster raised (%T) lacks %s, which this step needs", r.cluster, reflect.TypeFor[T]())
	}
	return c, nil
}

// raiseAMQP raises the cluster's AMQP broker, once, and keeps it as
// r.amqp: the mesh's own bus, raised with the cluster and only handed
// over here, or the AMQP bus of today beside NATS.
func (r *raised) raiseAMQP(ctx context.Context) error {
	if r.amqp != nil {
		return nil
	}
	raiser, err := capability[harness.AMQPRaiser](r)
	if err != nil {
		return err
	}
	broker, err := raiser.RaiseAMQP(ctx)
	if err != nil {
		return err
	}
	r.amqp = broker
	return nil
}

// worldKey is the key the world keeps r under.
func (r *raised) worldKey() string {
	if r.key != "" {
		return r.key
	}
	return r.meshFile
}

func (r *raised) close(ctx context.Context) error {
	return r.session.Close(ctx)
}
