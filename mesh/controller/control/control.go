package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// How long a CONTROL message is held before it comes again: controlRetry
// after a failure of the store's own (it refused the write), and, while
// the store is unavailable, longer each time up to controlRetryMax (ADR
// 0083's store window: nothing is dropped, and a store away for long is
// not asked every second). A message with no handler yet is held
// unhandledRetry.
const (
	controlRetry    = time.Second
	controlRetryMax = 30 * time.Second
	unhandledRetry  = 30 * time.Second
	// handleTimeout bounds one message's handling, the store's and the
	// bus's parts together.
	handleTimeout = 30 * time.Second
)

// ackTimeout bounds the wait for the bus to confirm an ack, and
// saveTimeout the wait for the store to take what the desk hands out.
const (
	ackTimeout  = 5 * time.Second
	saveTimeout = 5 * time.Second
)

// ControlCounts are what the CONTROL loop has done since it started.
type ControlCounts struct {
	// Enrolled, Pushed and Reported count the messages applied, by kind;
	// Replayed those the ledger held already; Refused the enrolments
	// answered with a refusal.
	Enrolled, Pushed, Reported int
	// Asked counts the builds asked of BUILDS, Built the outcomes taken.
	Asked, Built      int
	Replayed, Refused int
	// Terminated are the messages that could not be read; Held the
	// deliveries asked again later.
	Terminated, Held int
}

// ControlLoop is the controller as CONTROL's only consumer
// (wire.ControlConsumer, explicit ack). It hands each message to its
// handler; a handler's effect and the message's ledger entry commit in one
// update, so a redelivery, a duplicate publish or a controller killed
// between commit and ack applies once. A message that cannot be read is
// terminated and counted; a store unavailable holds the message with a
// growing delay (Hold) and it comes again.
type ControlLoop struct {
	st    store.Store
	guard *rollout.Guard // nil: pushes are stored, and NODES is not kept
	dir   string
	o     rollout.Options
	log   *slog.Logger
	bus   controlBus
	// on is the bus bus is (wire.BusNATS, wire.BusAMQP), which each report
	// taken is recorded as heard on; "" where the caller does not say.
	on string
	// composer makes the enrolments answered live, and serialises every
	// composition of the loop's (a push's too).
	composer *composer

	mu     sync.Mutex
	counts ControlCounts
	m      *meshdesc.Mesh // the description in force: the last pushed
}

// controlBus is what the CONTROL loop asks of the bus: CONTROL's
// deliveries, an enrolment's answer, a build request.
type controlBus interface {
	plane.ControlFeed
	plane.Answerer
	plane.BuildQueue
}

// FollowControl consumes CONTROL through bus and handles its messages
// until stop; answers and build requests go through bus too, and the
// declarations of a push are handed to guard.
func FollowControl(ctx context.Context, bus controlBus, m *meshdesc.Mesh, st store.Store, dir string, o rollout.Options, guard *rollout.Guard, on string) (loop *ControlLoop, stop func(), err error) {
	o = o.WithDefaults()
	l := &ControlLoop{m: m, st: st, guard: guard, dir: dir, o: o, log: o.Logger.With("loop", "control", "bus", on), bus: bus, on: on}
	l.composer = newComposer(l.mesh, st, dir, o)
	// Every token's user is revoked when it leaves the configuration: at
	// its expiry, or at the end of its grace once spent (scanTokens),
	// those issued later by another process too.
	started := o.Now()
	if err := scanTokens(ctx, st, l.composer, started, started, o.SpentTokenGrace); err != nil {
		return nil, nil, err
	}
	composing, stopComposing := context.WithCancel(context.WithoutCancel(ctx))
	var composed sync.WaitGroup
	composed.Go(func() { l.composer.run(composing) })
	composed.Go(func() { l.pruning(composing) })
	composed.Go(func() { l.scanningTokens(composing, started) })
	// Up to batchMax messages in hand: those waiting are applied in one
	// commit (batch.go), so that a backlog, a leaked token's junk among
	// it, drains at the store's commit rate times the batch, not one
	// fsync or transaction a message.
	in := make(chan plane.ControlMsg, batchMax)
	stopping := make(chan struct{})
	stopFeed, err := bus.Consume(ctx, batchMax, func(msg plane.ControlMsg) {
		// Once stopping, not handled: asked for again now, by the next
		// controller, rather than after the ack wait.
		select {
		case <-stopping:
			_ = msg.Hold(0)
			return
		default:
		}
		select {
		case in <- msg:
		case <-stopping:
			_ = msg.Hold(0)
		}
	})
	if err != nil {
		stopComposing()
		composed.Wait()
		return nil, nil, err
	}
	var handling sync.WaitGroup
	handling.Go(func() { l.follow(in, stopping) })
	return l, func() {
		close(stopping)
		handling.Wait()
		// What the feed fetched and did not hand over comes again (on
		// NATS after CONTROL's ack wait).
		stopFeed()
		// What was handed over and not handled is asked for again now.
	drain:
		for {
			select {
			case msg := <-in:
				_ = msg.Hold(0)
			default:
				break drain
			}
		}
		stopComposing()
		composed.Wait()
	}, nil
}

// Counts are the loop's counts so far.
func (l *ControlLoop) Counts() ControlCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}

// mesh is the description in force.
func (l *ControlLoop) mesh() *meshdesc.Mesh {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m
}

func (l *ControlLoop) setMesh(m *meshdesc.Mesh) {
	l.mu.Lock()
	l.m = m
	l.mu.Unlock()
}

func (l *ControlLoop) count(f func(*ControlCounts)) {
	l.mu.Lock()
	f(&l.counts)
	l.mu.Unlock()
}

// handle settles one delivery on its own: acked once its effect is
// committed and its answer sent, held while the store cannot take it,
// terminated when it cannot be read.
func (l *ControlLoop) handle(msg plane.ControlMsg) {
	ctx, cancel := context.WithTimeout(context.Background(), handleTimeout)
	defer cancel()
	it := l.apply(ctx, l.st, msg)
	l.settle([]*item{it})
}

// item is one delivery as apply left it: how it is to be settled, and
// what is to be done once the store has committed its effect.
type item struct {
	msg plane.ControlMsg
	log *slog.Logger
	// One of: ack; term (the reason); hold (the error); unhandled.
	ack       bool
	term      string
	hold      error
	unhandled bool
	fx        effects
}

// effects are what a handler does once its update is committed: the
// answers it publishes, the counts, the compositions it asks for.
type effects struct {
	answers []func(context.Context) error
	// enrolled says an answer carries a node's new host credential, whose
	// user a composition makes live (composeForAnswers).
	enrolled bool
	after    []func()
}

// apply runs msg's handler on st (the store, or a batch's part of one:
// batch.go) and says how msg is to be settled.
func (l *ControlLoop) apply(ctx context.Context, st store.Store, msg plane.ControlMsg) *item {
	it := &item{msg: msg, log: l.log.With("subject", msg.Subject())}
	pos := msg.Position()
	if pos == 0 && msg.ID() == "" {
		// Nothing to know it by again: a redelivery would apply twice.
		it.term = "neither a message id nor a position"
		it.log.Error("CONTROL delivery with neither a message id nor a position; terminated")
		it.fx.after = append(it.fx.after, func() { l.count(func(c *ControlCounts) { c.Terminated++ }) })
		return it
	}
	key := store.LedgerKey(msg.Subject(), msg.ID(), pos)
	it.log = it.log.With("seq", pos, "delivered", msg.Attempt())

	// The message's ledger entry carries its position, by which it is
	// pruned once the message is gone from CONTROL (ledger.go).
	//
	// A bus that keeps no positions (AMQP: 0) has its messages' entries
	// at position 1: below any the bus reports as prunable (it says the
	// highest), so they go once the bus's window has passed, where an
	// entry at 0 is one no message's and is never pruned.
	st = AtSequence(st, key, max(pos, 1))
	var err error
	switch subject := msg.Subject(); {
	case subject == wire.SubjectEnrol:
		err = l.enrol(ctx, st, key, msg.Data(), &it.fx)
	case subject == wire.SubjectPush:
		err = l.push(ctx, st, key, msg.Data())
	case isReport(subject):
		err = l.report(ctx, st, key, pos, subject, msg.Data(), &it.fx)
	case isSourceChange(subject):
		err = l.sourceChanged(ctx, st, key, subject, msg.Data())
	case subject == wire.SubjectBuilt:
		err = l.built(ctx, st, key, msg.Data(), &it.fx)
	default:
		it.unhandled = true
		return it
	}
	switch {
	case err == nil:
		it.ack = true
	case errors.Is(err, rollout.ErrBadControl):
		// Counted in the store before it is terminated, so status names
		// it; a store that cannot count it now holds it like any other.
		it.fx = effects{}
		x := store.Refusal{Kind: refusedKind(msg.Subject()), Key: key, At: l.o.Now(), Reason: err.Error()}
		if _, rerr := RecordRefusal(ctx, st, x); rerr != nil {
			it.hold = rerr
			return it
		}
		it.term = err.Error()
		it.fx.after = append(it.fx.after, func() { l.count(func(c *ControlCounts) { c.Terminated++ }) })
	default:
		it.fx = effects{}
		it.hold = err
	}
	return it
}

// composeForAnswers makes the users of the nodes the items enrolled live,
// once for all of them: before their answers go on a mesh on AMQP, after
// them (asked of the composer) on one on NATS.
//
// On AMQP a composition is live when it returns (the broker's management
// API), so a host answered after it logs in with its new credential at
// once. Answered first, its first login was refused, and RabbitMQ holds a
// refused login for three seconds before it closes the connection: each
// enrolment took three seconds longer, and left a refused login in the
// broker's log. On NATS the server loads a composition only when it next
// reads nats.conf, so composing first would not have the user live before
// the answer either; the composer, asked, makes one composition of a
// fleet's enrolments arriving meanwhile, and no batch's answers wait for
// one. A composition that fails before the answers is asked of the
// composer, which tries until it succeeds; the answers go all the same
// (the store holds the enrolments), and their hosts dial until their
// users are live, as on NATS.
//
// The composition is bounded by ackTimeout, its own: a broker slow to
// take it delays the answers no longer than that.
func (l *ControlLoop) composeForAnswers(items []*item) {
	if !slices.ContainsFunc(items, func(it *item) bool { return it.fx.enrolled && it.hold == nil }) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if bus, err := rollout.MeshBus(ctx, l.st); err != nil || bus != rollout.AMQP {
		l.composer.ask()
		return
	}
	if err := l.composer.compose(ctx); err != nil {
		l.log.Warn("enrolled hosts' users not made live before their answers; composed after", "err", err)
		l.composer.ask()
	}
}

// settle does what the items' committed effects call for, then settles
// each delivery: the answers are published and flushed before any
// acknowledgement, so that an acknowledged enrolment was answered.
func (l *ControlLoop) settle(items []*item) {
	l.composeForAnswers(items)
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	answered := false
	for _, it := range items {
		for _, publish := range it.fx.answers {
			if err := publish(ctx); err != nil && it.hold == nil {
				it.ack, it.hold = false, fmt.Errorf("answer the enrolment: %w", err)
			}
			answered = true
		}
	}
	if answered {
		if err := l.bus.Flush(ctx); err != nil {
			for _, it := range items {
				if len(it.fx.answers) > 0 && it.hold == nil {
					it.ack, it.hold = false, fmt.Errorf("answer the enrolment: %w", err)
				}
			}
		}
	}
	acked := 0
	for _, it := range items {
		for _, f := range it.fx.after {
			f()
		}
		switch {
		case it.unhandled:
			it.log.Warn("no handler for this CONTROL subject yet; held", "delay", unhandledRetry)
			l.count(func(c *ControlCounts) { c.Held++ })
			_ = it.msg.Hold(unhandledRetry)
		case it.hold != nil:
			l.hold(it.msg, it.log, it.hold)
		case it.term != "":
			it.log.Warn("CONTROL message refused; terminated", "err", it.term)
			_ = it.msg.Term(it.term)
		case it.ack && len(items) == 1:
			ackControl(it.msg, it.log)
		case it.ack:
			// A batch's acks go out together and are confirmed once
			// (flush): one round trip, not one a message.
			if err := it.msg.AckLater(); err != nil {
				it.log.Warn("CONTROL ack not sent; the message comes again and is recognised", "err", err)
			}
			acked++
		}
	}
	if acked > 0 {
		fctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		defer cancel()
		if err := l.bus.Flush(fctx); err != nil {
			l.log.Warn("CONTROL acks not confirmed; the messages may come again and be recognised", "acks", acked, "err", err)
		}
	}
}

// hold asks for msg again later: while the store is unavailable, later
// each time it came (awayDelay); after any other failure, in
// controlRetry.
func (l *ControlLoop) hold(msg plane.ControlMsg, log *slog.Logger, err error) {
	l.count(func(c *ControlCounts) { c.Held++ })
	if errors.Is(err, store.ErrStoreUnavailable) {
		delay := awayDelay(msg)
		log.Warn("the store is unavailable; the message is held and comes again", "delay", delay, "err", err)
		_ = msg.Hold(delay)
		return
	}
	log.Error("CONTROL message not applied; it comes again", "delay", controlRetry, "err", err)
	_ = msg.Hold(controlRetry)
}

// awayDelay is how long msg is held while the store is unavailable:
// controlRetry the first time it came, twice as long each time after, up
// to controlRetryMax. It counts msg's own deliveries (both buses give
// them), not the loop's: a delay grown by every other message held
// meanwhile (each node's reports) kept a message that had come twice
// waiting controlRetryMax after the store was back (an enrolment answered
// 30 s late on AMQP, a push 17 s late on NATS).
func awayDelay(msg plane.ControlMsg) time.Duration {
	d := controlRetry
	for n := 1; n < msg.Attempt() && d < controlRetryMax; n++ {
		d *= 2
	}
	return min(d, controlRetryMax)
}

// refusedKind is what a refused message on subject is counted as.
func refusedKind(subject string) string {
	switch {
	case subject == wire.SubjectEnrol:
		return store.RefusedEnrolment
	case subject == wire.SubjectPush:
		return store.RefusedPush
	case isReport(subject):
		return store.RefusedReport
	case isSourceChange(subject), subject == wire.SubjectBuilt:
		return store.RefusedBuild
	}
	return store.RefusedOther
}

func (l *ControlLoop) enrol(ctx context.Context, st store.Store, key string, data []byte, fx *effects) error {
	e, err := Enrol(ctx, l.mesh(), st, l.dir, key, data, l.o, func(e Enrolment) error {
		// Checked again here, where the answer leaves: it carries a
		// credential, and goes only under the claimed token's own inbox.
		if err := l.bus.CheckEnrolReply(e.Token, e.Reply); err != nil {
			return fmt.Errorf("%w: %w", rollout.ErrBadControl, err)
		}
		// Published once the update is committed (settle), with the
		// answers of the rest of its batch.
		reply, answer := e.Reply, e.Answer.Marshal()
		fx.answers = append(fx.answers, func(ctx context.Context) error { return l.bus.Answer(ctx, reply, answer) })
		return nil
	})
	if err != nil {
		return err
	}
	fx.enrolled = e.Answer.Refused == ""
	fx.after = append(fx.after, func() {
		if !e.Leaves.IsZero() {
			// Made live around its answer (composeForAnswers); once the
			// token's grace is over, its user is revoked. After a crash,
			// the next controller's start composes.
			l.composer.askAt(e.Leaves)
		}
		l.count(func(c *ControlCounts) {
			switch {
			case e.Replayed:
				c.Replayed++
			case e.Answer.Refused != "":
				c.Refused++
			default:
				c.Enrolled++
			}
		})
	})
	return nil
}

func (l *ControlLoop) push(ctx context.Context, st store.Store, key string, data []byte) error {
	var p rollout.Pushed
	err := l.composer.locked(func() error {
		var err error
		p, err = rollout.Push(ctx, st, l.dir, key, data, l.o)
		return err
	})
	if err != nil {
		return err
	}
	l.setMesh(p.Mesh)
	if l.guard != nil {
		if err := l.guard.Set(ctx, p.Declared); err != nil {
			// Committed: the sweep publishes what is missing.
			l.log.Warn("the push's declarations are not all published yet; the guard's sweep publishes them", "err", err)
		}
	}
	l.count(func(c *ControlCounts) {
		if p.Replayed {
			c.Replayed++
		} else {
			c.Pushed++
		}
	})
	return nil
}

func (l *ControlLoop) report(ctx context.Context, st store.Store, key string, seq uint64, subject string, data []byte, fx *effects) error {
	if _, err := TakeReport(ctx, st, key, seq, subject, data, l.on, l.o); err != nil {
		return err
	}
	fx.after = append(fx.after, func() { l.count(func(c *ControlCounts) { c.Reported++ }) })
	return nil
}

// sourceChanged records a repository's announcement as a build asked for
// and sends its request to BUILDS; a redelivery sends it again, which the
// request's message id (the build's id) makes a duplicate.
func (l *ControlLoop) sourceChanged(ctx context.Context, st store.Store, key, subject string, data []byte) error {
	b, waiting, err := AskBuild(ctx, st, l.mesh(), key, subject, data, l.o)
	if err != nil {
		return err
	}
	if waiting {
		if err := l.bus.RequestBuild(ctx, b.ID, wire.Marshal(b.Request())); err != nil {
			return fmt.Errorf("ask for build %s: %w", b.ID, err)
		}
		l.log.Info("build asked", "build", b.ID)
	}
	l.count(func(c *ControlCounts) { c.Asked++ })
	return nil
}

// built records a builder's outcome, once.
func (l *ControlLoop) built(ctx context.Context, st store.Store, key string, data []byte, fx *effects) error {
	b, err := RecordBuilt(ctx, st, key, data, l.o)
	if err != nil {
		return err
	}
	fx.after = append(fx.after, func() {
		l.log.Info("build outcome", "build", b.ID, "outcome", b.Outcome, "digest", b.Digest, "error", b.Error)
		l.count(func(c *ControlCounts) { c.Built++ })
	})
	return nil
}

// isSourceChange reports whether subject is a repository's announcement.
func isSourceChange(subject string) bool {
	_, ok := wire.SourceOf(subject)
	return ok
}

// ackControl acknowledges and waits for the server to confirm it: a lost
// ack is a redelivery, which the ledger recognises, and the log says so.
func ackControl(msg plane.ControlMsg, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := msg.Ack(ctx); err != nil {
		log.Warn("CONTROL ack not confirmed; the message may come again and be recognised", "err", err)
	}
}

// scanningTokens scans the tokens every o.TokenScanEvery until ctx ends
// (scanTokens), each scan after the last.
func (l *ControlLoop) scanningTokens(ctx context.Context, last time.Time) {
	tick := time.NewTicker(l.o.TokenScanEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := l.o.Now()
		rctx, cancel := context.WithTimeout(ctx, handleTimeout)
		err := scanTokens(rctx, l.st, l.composer, last, now, l.o.SpentTokenGrace)
		cancel()
		if err != nil {
			l.log.Warn("tokens not scanned this time", "err", err)
			continue
		}
		last = now
	}
}
