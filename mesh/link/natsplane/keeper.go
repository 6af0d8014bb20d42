package natsplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// sweepInterval is how often the keeper checks every declaration even
// when the stream told it nothing: a restore whose publish failed is
// retried.
const sweepInterval = 30 * time.Second

// wasKept is how many of a node's declarations the keeper remembers as
// its own after a Set replaced them.
const wasKept = 8

// setAttempts is how often Set sweeps before it leaves what is missing to
// the periodic sweep: 100 ms doubling, about 3 s in all.
const setAttempts = 6

// declared is one node's declaration as the controller signed it.
type declared struct {
	body, signature []byte
}

// keeper keeps NODES holding, for every node, the declaration the
// controller signed, and nothing on any other subject. Within the control
// account a host could once make the server write onto another node's
// subject (its report's PubAck, a JetStream API status:
// docs/decisions/0001; hosts are outside it since 0007): readers refuse
// what the controller did not sign for that subject
// (wire.VerifyDeclaration), and the keeper puts the node's own back.
type keeper struct {
	js   jetstream.JetStream
	want map[string]declared // by subject
	// was holds, by subject, what want held before the last wasKept Sets:
	// a subject found holding one of them holds the controller's own
	// declaration, outdated by a Set (the watcher may deliver it after the
	// next Set), not one put there by anyone else.
	was map[string][]declared
	log *slog.Logger
	mu  sync.Mutex // one repair at a time: the sweep, the watcher, Set

	cancel context.CancelFunc
	cc     jetstream.ConsumeContext
	done   chan struct{}
}

// Keep publishes each node's signed declaration where NODES does not
// already hold it, then watches NODES and, within moments of anything
// else landing on a node's subject, publishes that node's own again; a
// message on a subject that is no node's declaration is purged. It
// returns once the first pass is done.
func (c *Controller) Keep(ctx context.Context, decls []plane.SignedDeclaration) (plane.Keeper, error) {
	k := &keeper{js: c.jsControl, want: bySubject(decls), was: map[string][]declared{}, log: c.log.With("keeper", wire.StreamNodes), done: make(chan struct{})}
	if err := k.sweep(ctx); err != nil {
		return nil, err
	}
	// DeliverLastPerSubject: what NODES holds now, then everything new,
	// and again from where it was after a reconnect (the ordered consumer
	// recreates itself).
	oc, err := k.js.OrderedConsumer(ctx, wire.StreamNodes, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", wire.StreamNodes, err)
	}
	wctx := context.WithoutCancel(ctx)
	k.cc, err = oc.Consume(func(msg jetstream.Msg) {
		k.check(wctx, msg.Subject(), msg.Data(), msg.Headers().Get(wire.HeaderSignature))
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		k.log.Warn("watching declarations", "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", wire.StreamNodes, err)
	}
	sweepCtx, cancel := context.WithCancel(wctx)
	k.cancel = cancel
	go func() {
		defer close(k.done)
		t := time.NewTicker(sweepInterval)
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				if err := k.sweep(sweepCtx); err != nil && sweepCtx.Err() == nil {
					k.log.Warn("sweeping declarations", "err", err)
				}
			}
		}
	}()
	return k, nil
}

func bySubject(decls []plane.SignedDeclaration) map[string]declared {
	out := map[string]declared{}
	for _, d := range decls {
		out[wire.NodeDeclare(d.Node)] = declared{body: d.Body, signature: []byte(d.Signature)}
	}
	return out
}

// Stop ends the watch and the sweeps.
func (k *keeper) Stop() {
	k.cancel()
	k.cc.Stop()
	<-k.done
}

// Set makes decls the declarations NODES is to hold, and publishes them
// where it does not: a node's subject that is no longer wanted is purged.
func (k *keeper) Set(ctx context.Context, decls []plane.SignedDeclaration) error {
	want := bySubject(decls)
	k.mu.Lock()
	old := k.want
	k.want = want
	for subject, d := range old {
		h := append(k.was[subject], d)
		if len(h) > wasKept {
			h = h[len(h)-wasKept:]
		}
		k.was[subject] = h
	}
	k.mu.Unlock()
	for subject := range old {
		if _, ok := want[subject]; !ok {
			if err := purgeSubject(ctx, k.js, subject); err != nil {
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
		err := k.sweep(ctx)
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

// sweep checks the last message of every node's subject.
func (k *keeper) sweep(ctx context.Context) error {
	st, err := k.js.Stream(ctx, wire.StreamNodes)
	if err != nil {
		return fmt.Errorf("read %s: %w", wire.StreamNodes, err)
	}
	k.mu.Lock()
	subjects := slices.Collect(maps.Keys(k.want))
	k.mu.Unlock()
	for _, subject := range subjects {
		m, err := st.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			k.check(ctx, subject, nil, "")
		case err != nil:
			return fmt.Errorf("read %s on %s: %w", subject, wire.StreamNodes, err)
		default:
			k.check(ctx, subject, m.Data, m.Header.Get(wire.HeaderSignature))
		}
	}
	return nil
}

// check repairs subject if what it holds is not the controller's current
// declaration for it.
func (k *keeper) check(ctx context.Context, subject string, body []byte, signature string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	want, ok := k.want[subject]
	if !ok {
		// No node's declaration: what the server was made to write on a
		// subject of its own choosing. NODES keeps nothing but declarations.
		if err := purgeSubject(ctx, k.js, subject); err != nil {
			k.log.Error("purge a subject of NODES that is no node's declaration", "subject", subject, "err", err)
			return
		}
		k.log.Warn("purged a subject of NODES that is no node's declaration", "subject", subject)
		return
	}
	if bytes.Equal(body, want.body) && signature == string(want.signature) {
		return
	}
	if slices.ContainsFunc(k.was[subject], func(d declared) bool { return bytes.Equal(body, d.body) && signature == string(d.signature) }) {
		k.log.Debug("declaration outdated by the controller's own; publishing it", "subject", subject)
	} else if body != nil {
		k.log.Warn("declaration replaced by something the controller did not sign; restoring", "subject", subject, "bytes", len(body))
	}
	msg := &nats.Msg{Subject: subject, Header: nats.Header{wire.HeaderSignature: []string{string(want.signature)}}, Data: want.body}
	if _, err := k.js.PublishMsg(ctx, msg); err != nil {
		k.log.Error("publish declaration; the next sweep tries again", "subject", subject, "err", err)
	}
}

func purgeSubject(ctx context.Context, js jetstream.JetStream, subject string) error {
	st, err := js.Stream(ctx, wire.StreamNodes)
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(subject))
}
