package amqpplane

import (
	"context"
	"errors"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// ResendEvery is how often the keeper puts every node's declaration
// again by default (ControllerOptions.ResendEvery): should node.<node>
// lose it (a queue purged or deleted and made again by an operator, a
// broker that lost an unsynced write), its host gets it again within
// this.
const ResendEvery = 30 * time.Second

// keeper keeps each node's newest declaration in node.<node>: no other
// principal may write there (only the controller writes amq.default or
// the key mesh.node.<node>.declare on mesh.control), so there is nothing
// to watch and repair, only to put again for a host that took it.
type keeper struct {
	c    *Controller
	mu   sync.Mutex
	want map[string]plane.SignedDeclaration // by node

	cancel context.CancelFunc
	done   chan struct{}
}

// Keep puts each declaration in its node's queue and puts them again
// every ControllerOptions.ResendEvery until Stop.
func (c *Controller) Keep(ctx context.Context, decls []plane.SignedDeclaration) (plane.Keeper, error) {
	k := &keeper{c: c, want: map[string]plane.SignedDeclaration{}, done: make(chan struct{})}
	if err := k.Set(ctx, decls); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	go func() {
		defer close(k.done)
		t := time.NewTicker(c.o.ResendEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if err := k.putAll(rctx); err != nil && rctx.Err() == nil {
					c.log.Warn("declarations not all put again", "err", err)
				}
			}
		}
	}()
	return k, nil
}

// Set makes decls the declarations kept and puts them now; the queue of
// a node left out (no longer in the description) is purged.
func (k *keeper) Set(ctx context.Context, decls []plane.SignedDeclaration) error {
	want := map[string]plane.SignedDeclaration{}
	for _, d := range decls {
		want[d.Node] = d
	}
	k.mu.Lock()
	old := k.want
	k.want = want
	k.mu.Unlock()
	var errs []error
	for node := range old {
		if _, ok := want[node]; !ok {
			errs = append(errs, k.c.purge(ctx, wire.NodeQueue(node)))
		}
	}
	errs = append(errs, k.putEach(ctx, decls))
	return errors.Join(errs...)
}

// putsAtOnce bounds the declarations put at once. Each put waits for the
// broker's confirm of a persistent message, which it gives once the
// message is on disk, and the broker confirms puts that arrive together
// after one write: one at a time, 200 nodes' declarations took 9 s on a
// slower machine. Measured again side by side on a faster one, the
// switch's time moved within its noise (docs/decisions/0013, "Scale").
// Each node's is its own queue, so their order does not matter. No more
// than the publishers' pool keeps idle (amqpconn's maxIdle): a wider
// burst would open channels only to close them.
const putsAtOnce = 8

// putEach puts every declaration, putsAtOnce at a time, and says what
// failed.
func (k *keeper) putEach(ctx context.Context, decls []plane.SignedDeclaration) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	slots := make(chan struct{}, putsAtOnce)
	for _, d := range decls {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := k.put(ctx, d); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (k *keeper) putAll(ctx context.Context) error {
	k.mu.Lock()
	all := make([]plane.SignedDeclaration, 0, len(k.want))
	for _, d := range k.want {
		all = append(all, d)
	}
	k.mu.Unlock()
	return k.putEach(ctx, all)
}

// put publishes one declaration on its node's key, the signature as a
// header: node.<node> keeps the newest alone (x-max-length 1, drop-head).
func (k *keeper) put(ctx context.Context, d plane.SignedDeclaration) error {
	return k.c.publish(ctx, wire.ExchangeControl, wire.NodeDeclare(d.Node), amqp.Publishing{
		Headers:      amqp.Table{wire.HeaderSignature: d.Signature},
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    wire.NewID(),
		Body:         d.Body,
	})
}

// Stop ends the resending.
func (k *keeper) Stop() {
	k.cancel()
	<-k.done
}
