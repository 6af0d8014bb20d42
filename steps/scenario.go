package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// teardownTimeout bounds the After hook, which runs even when the run's
// context has ended.
const teardownTimeout = 2 * time.Minute

// scenario is one scenario's state.
type scenario struct {
	w *World
	r *raised
	// touched is what the scenario changed in r that a reset puts back.
	touched touches
	// sharing: the scenario shares clusters though ctx does not say so (a
	// test's scenario, outside a bed).
	sharing bool
	// bus is the bus the scenario's mesh is on ("" or topology.BusNATS:
	// NATS), as its raise step said.
	bus string

	clients map[string]*client // by user
	it      *client            // the principal the last Given connected

	lastOp      observe.Op
	lastSubject string
	lastErr     error
	counted     []stored // the stream counts of lastSubject before a publish

	emitted  *observe.Acked
	delivery *observe.Fetched

	streams     map[string]observe.Stream
	probe       harness.ProbeResult
	before      natsIdentity
	written     time.Time
	wholeConfig []byte // the composed configuration before a step tore it
	firstLogin  <-chan login
	revoked     map[string]savedCredential

	drv drivers // the conformance drivers run; each domain's own state is in its file

	held        observe.Holding // the control plane's streams, noted
	intoControl int             // requests into CONTROL sent since (enrolments, reports, announcements)
	pullsUntil  time.Time       // when the pulls aimed at the control plane expire
	cleanups    []func()
	faultAt     time.Time // when the scenario's last fault took effect
	storeBack   time.Time // when the store was last healthy again after a fault
	durable     durability
	live        living
	ro          rollout
	pp          persons
	bd          builds
	iso         isolation                    // the AMQP isolation tries
	ac          amqpControl                  // the control plane on AMQP, as watched
	witnessed   *observe.PredecessorSnapshot // the witness's last note
	ad          adoption                     // the server beside the broker
	cut         cutover                      // the last cutover run
	// brokenFrom and brokenUntil bound the last fault held for a time.
	brokenFrom, brokenUntil time.Time
}

// client is a connection as one principal, with its credential.
type client struct {
	*observe.Client
	cred wire.Credential
}

// savedCredential is a credential kept after apply deleted its file.
type savedCredential = wire.Credential

func (s *scenario) after(ctx context.Context, sc *godog.Scenario, err error) (context.Context, error) {
	scenarioCtx := ctx // the run's, to tell an interrupt from a failure
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	for _, stop := range s.cleanups {
		stop()
	}
	for _, c := range s.clients {
		c.Close()
	}
	s.stopDrivers(ctx)
	if s.r == nil {
		return ctx, nil
	}
	// A fault a failed or interrupted step left in effect is undone; one
	// that cannot be leaves the cluster to be thrown away.
	undoErr := s.r.cluster.UndoAll(ctx)
	if undoErr != nil {
		beds.Logf(ctx, "teardown: %v", undoErr)
		s.r.tainted = true
		if err == nil {
			err = undoErr
		}
	}
	if err != nil {
		if dir := beds.ArtifactDir(ctx); dir != "" {
			if saveErr := s.r.cluster.SaveLogs(ctx, dir); saveErr != nil {
				beds.Logf(ctx, "saving container logs: %v", saveErr)
			} else {
				beds.Logf(ctx, "container logs saved in %s", dir)
			}
		}
		// A failed scenario may have left the cluster in any state.
		s.r.tainted = true
	}
	if !s.r.tainted && s.touched.any() {
		if resetErr := s.reset(ctx); resetErr != nil {
			if !errors.Is(resetErr, errNotShared) {
				beds.Logf(ctx, "teardown: the cluster is thrown away: %v", resetErr)
			}
			s.r.tainted = true
		}
	}
	if relErr := s.w.release(ctx, s.r, failure(scenarioCtx, sc, err)); relErr != nil {
		return ctx, fmt.Errorf("tear down cluster: %w", relErr)
	}
	if undoErr != nil {
		return ctx, fmt.Errorf("tear down: %w", undoErr)
	}
	return ctx, nil
}

// cluster is the scenario's cluster, or an error if none was raised.
func (s *scenario) cluster() (*raised, error) {
	if s.r == nil {
		return nil, errNoCluster
	}
	return s.r, nil
}

// connect returns a connection as user, dialling it once per scenario.
func (s *scenario) connect(ctx context.Context, user string) (*client, error) {
	if c, ok := s.clients[user]; ok && !c.IsClosed() {
		return c, nil
	}
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	cred, err := r.cluster.Credential(ctx, user)
	if err != nil {
		return nil, err
	}
	c, err := s.dial(ctx, cred)
	if err != nil {
		return nil, err
	}
	s.clients[user] = c
	return c, nil
}

// dial connects with cred through the bus's published port. An attempt
// that runs out of time, or whose connection was cut in its handshake, is
// made again, up to dialWithin in all: a scenario may have made the bus's
// link lose packets on purpose (the conformance bed's loss), and a
// handshake that lost its segments more than once outlasts one attempt,
// or is closed by the port's proxy when its own connection to the server
// failed (nats: tls error: EOF, once in five runs); a refusal (a login
// refused) is returned at once.
func (s *scenario) dial(ctx context.Context, cred wire.Credential) (*client, error) {
	addr, err := s.r.cluster.BusAddress(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(dialWithin)
	for {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		c, err := observe.Dial(actx, cred, addr)
		cancel()
		if err == nil {
			return &client{Client: c, cred: cred}, nil
		}
		if !(timedOut(err) || cutInHandshake(err)) || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
	}
}

// timedOut says whether a dial ran out of time rather than was refused.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || (errors.As(err, &ne) && ne.Timeout())
}

// cutInHandshake says whether a dial's connection ended before the
// server answered its login: the transport failed, nothing was refused.
// Over a link losing packets the handshake can also outlast the server's
// first ping, which nats.go then reads where it expects the login's PONG
// (an error it spells only as text): nothing was refused there either.
func cutInHandshake(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		(err != nil && strings.Contains(err.Error(), pingInHandshake))
}

// pingInHandshake is nats.go's error for a PING read where the login's PONG was due.
const pingInHandshake = "expected 'PONG', got 'PING'"

// dialWithin bounds the attempts of one dial of a step.
const dialWithin = 45 * time.Second

// jetStream is the controller's view of JetStream in one account
// (wire.Account*), for reading streams and consumers from outside.
func (s *scenario) jetStream(ctx context.Context, account string) (jetstream.JetStream, error) {
	user := wire.ControllerMeshUser
	if account == wire.AccountControl {
		user = wire.ControllerUser
	}
	c, err := s.connect(ctx, user)
	if err != nil {
		return nil, err
	}
	return jetstream.New(c.Conn)
}

// streamJetStream is the controller's view of the account stream lives in.
func (s *scenario) streamJetStream(ctx context.Context, stream string) (jetstream.JetStream, error) {
	return s.jetStream(ctx, wire.StreamAccount(stream))
}

// waitUntil waits for the instant at, known in advance (a token's
// lifetime, its grace): a wait on the clock itself, not a guess at how
// long something takes.
func waitUntil(ctx context.Context, at time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(at)):
		return nil
	}
}

// eventually polls check until it succeeds or the deadline passes, and
// then returns its last error.
func eventually(ctx context.Context, within time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		started := time.Now()
		err := check(ctx)
		if err == nil {
			return nil
		}
		// A check cut short by the deadline says only that; the one
		// before it says what was still wrong.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", within, last)
		case <-time.After(pause(50*time.Millisecond, time.Since(started))):
		}
	}
}

// pause is how long a poll waits before it checks again: its interval,
// or as long as the last check took when that was longer. A costly check
// (a one-shot container, or rabbitmqctl, which boots an Erlang VM: a
// core-second each) then takes at most half of the time, not all of it
// back to back, and leaves the cores to the cluster it waits on, which is
// what makes the check pass.
func pause(interval, took time.Duration) time.Duration { return max(interval, took) }

// throughout runs check repeatedly until a run of it that started after
// the window had passed succeeds, and returns the first error: what must
// hold for a while rather than come about.
func throughout(ctx context.Context, window time.Duration, check func(context.Context) error) error {
	end := time.Now().Add(window)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		last := time.Now().After(end)
		if err := check(ctx); err != nil {
			return err
		}
		if last {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("before %s had passed: %w", window, ctx.Err())
		case <-tick.C:
		}
	}
}

// within runs check repeatedly until it succeeds, and fails if it still
// fails when run after the window has passed. Unlike eventually, a check
// under way when the window ends is not cut short: a reading that takes
// long (a probe container) still counts.
func within(ctx context.Context, window time.Duration, check func(context.Context) error) error {
	end := time.Now().Add(window)
	for {
		started := time.Now()
		last := started.After(end)
		err := check(ctx)
		if err == nil {
			return nil
		}
		if last {
			return fmt.Errorf("after %s: %w", window, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("before %s had passed: %w", window, ctx.Err())
		case <-time.After(min(pause(250*time.Millisecond, time.Since(started)), max(time.Until(end), 0)+time.Millisecond)):
		}
	}
}

// isAuthorization reports whether err is the server refusing a login or
// closing a connection whose user was revoked.
func isAuthorization(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}
