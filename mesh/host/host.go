package host

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/buses"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// Defaults of Options.
const (
	DefaultHeartbeat   = 5 * time.Second
	DefaultPoll        = time.Second
	DefaultReportEvery = 15 * time.Second
	// DefaultTokenRefusedFor is Options.TokenRefusedFor's default: far
	// above the second a composition takes to reach the server.
	DefaultTokenRefusedFor = time.Minute
)

// installFirst bounds the first attempt to fetch a declaration's
// artifacts, installTimeout the longest.
const (
	installFirst   = time.Second
	installTimeout = 2 * time.Minute
)

// ReadyLog is what the host logs once it is connected as itself.
const ReadyLog = "ready"

// SwitchingLog is what the host logs when it takes up a cutover's switch:
// from then until ReadyLog names the new bus, its loop sends nothing on
// either bus (the scale benchmark reads the two to time it).
const SwitchingLog = "switching"

// Options are what Run needs.
type Options struct {
	// State is the host's state directory.
	State State
	// TokenFile is the enrolment credential, read only while the state
	// holds no credential of the host's own.
	TokenFile string
	// Heartbeat is how often the host says it is alive; DefaultHeartbeat
	// when zero.
	Heartbeat time.Duration
	// Poll is how often the host reads its newest declaration and sends
	// the reports waiting; DefaultPoll when zero.
	Poll time.Duration
	// Programs is the directory of the modules' programs (<module>, else
	// DefaultProgram), each declared module run from it as its own
	// process; empty, the host runs no module.
	Programs string
	// TokenRefusedFor is how long the bus may refuse the token's login,
	// without a break, before the host gives up and says a new token is
	// needed (ErrTokenRefused); DefaultTokenRefusedFor when zero. A token
	// just issued is refused for the moment its user takes to be
	// composed; one spent (its grace over), expired or revoked, for good.
	TokenRefusedFor time.Duration
	// ModuleIDs is the span the host allots its modules' user and group
	// ids from; DefaultIDRange when zero.
	ModuleIDs IDRange
	// ReportEvery is how often the host reports what it runs even when
	// nothing changed; DefaultReportEvery when zero. A report made while
	// the bus is out of reach waits in the outbox and is sent later.
	ReportEvery time.Duration
	// Dial are extra bus options (a test dials another address).
	Dial   []link.Option
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.ReportEvery == 0 {
		o.ReportEvery = DefaultReportEvery
	}
	if o.TokenRefusedFor == 0 {
		o.TokenRefusedFor = DefaultTokenRefusedFor
	}
	if o.ModuleIDs == (IDRange{}) {
		o.ModuleIDs = DefaultIDRange
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Alive is a heartbeat's payload.
type Alive struct {
	Node string    `json:"node"`
	At   time.Time `json:"at"`
}

// ErrTokenRefused is wrapped when the bus keeps refusing the token's
// login: the token was spent and its grace is over (by this host, killed
// after the controller answered and before it kept the answer, or by
// another), it expired, or it was revoked. Only a new token helps.
var ErrTokenRefused = errors.New("the bus refuses the enrolment token: issue the node a new token (mesh-controller token issue) and start the host with it")

// ErrIsolation is wrapped when the host cannot run modules as identities
// of their own (it is not root, a directory on the way is closed to
// other users): it then runs none, rather than run them as itself.
var ErrIsolation = errors.New("modules cannot run as identities of their own")

// Run is the host: it enrols with its token unless its state holds its
// own credential already, connects as itself, logs ReadyLog, and says it
// is alive every Heartbeat until ctx ends, when it returns nil. A refused
// enrolment is returned at once (ErrRefused): asking again will not help.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	log := o.Logger
	if err := o.State.open(); err != nil {
		return err
	}
	if o.Programs != "" {
		if err := preflight(o.Programs, o.State); err != nil {
			return err
		}
	}
	cred, err := o.State.Credential()
	if errors.Is(err, ErrNoState) {
		if cred, err = enrolOnce(ctx, o); err != nil {
			return err
		}
		log.Info("enrolled", "node", cred.Node)
	} else if err != nil {
		return err
	}
	key, err := wire.DecodeDeclarationKey(cred.DeclarationKey)
	if err != nil {
		return err
	}
	out, err := openOutbox(o.State)
	if err != nil {
		return err
	}
	bus, err := dialRetrying(ctx, cred, o)
	if err != nil {
		return err
	}
	defer func() { _ = bus.Close() }() // the bus the host is on when it stops
	log.Info(ReadyLog, "node", cred.Node, "user", cred.User())
	sealing, err := o.State.SealingKey()
	if err != nil {
		return err
	}
	n := &node{name: cred.Node, key: key, sealing: sealing, state: o.State, out: out, log: log, cred: cred, dial: o.Dial}
	if o.Programs != "" {
		n.sup = &supervisor{programs: o.Programs, state: o.State, ids: &identities{state: o.State, span: o.ModuleIDs}, node: cred.Node, log: log}
		defer n.sup.stopAll()
		// What was applied before a restart runs again at once, with its
		// credentials fetched again if any is missing (a kill before they
		// were kept, a state of an older layout).
		if a, err := o.State.Applied(); err == nil && a.Declaration.Revision > 0 {
			if n.credentialMissing(a.Declaration) {
				fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := fetchCredentials(fctx, bus, n.state, n.sealing, a.Declaration, n.identity); err != nil {
					log.Warn("the modules applied wait for their credentials", "err", err)
				}
				cancel()
			}
			if err := n.sup.set(a.Declaration); err != nil {
				log.Error("the modules applied cannot run", "err", err)
			}
		}
	}
	beat := time.NewTicker(o.Heartbeat)
	defer beat.Stop()
	poll := time.NewTicker(o.Poll)
	defer poll.Stop()
	// The periodic reports are made apart from the loop below, which may
	// wait seconds on a bus out of reach: a report is made on time and
	// waits in the outbox.
	reporting := make(chan struct{})
	go func() {
		every := time.NewTicker(o.ReportEvery)
		defer every.Stop()
		for {
			select {
			case <-ctx.Done():
				close(reporting)
				return
			case <-every.C:
				if a, err := o.State.Applied(); err == nil && a.Declaration.Revision > 0 {
					n.report(a, n.lastRefusal())
				}
			}
		}
	}()
	defer func() { <-reporting }()
	for {
		n.declarations(ctx, bus)
		if n.moved != nil {
			// Switched (a cutover): the connection to the new bus, made
			// before the credentials were kept, is the one to go on with;
			// the report of the switch is sent on it.
			_ = bus.Close()
			bus, n.moved = n.moved, nil
			log.Info(ReadyLog, "node", n.cred.Node, "user", n.cred.User(), "bus", wire.BusOfScheme(n.cred.Scheme()))
		}
		if err := out.send(ctx, bus); err != nil && ctx.Err() == nil {
			log.Warn("reports wait in the outbox", "waiting", out.Len(), "err", err)
		}
		select {
		case <-ctx.Done():
			log.Info("stopping", "why", context.Cause(ctx))
			return nil
		case <-beat.C:
			alive, _ := json.Marshal(Alive{Node: cred.Node, At: time.Now().UTC()})
			if err := bus.Alive(ctx, cred.Node, alive); err != nil {
				log.Warn("heartbeat not sent", "err", err)
			}
		case <-poll.C:
		case <-out.kick:
		}
	}
}

// node is the host's view of its declarations.
type node struct {
	name    string
	key     ed25519.PublicKey
	sealing seal.Key
	state   State
	out     *outbox
	log     *slog.Logger
	// refused names what was last refused and reported (refusalOf, or
	// the reason of a refusal with nothing read to name): a refusal is
	// said once, not every poll.
	refused string
	// cred is the host's credential, which says the bus it is on; dial
	// are the extra options it dials with. moved is the connection to the
	// bus a switch moved it to, until the host goes on with it (move).
	cred  wire.Credential
	dial  []link.Option
	moved plane.Host
	// sup runs the modules; nil when the host runs none.
	sup *supervisor
	// installWait bounds the next attempt to fetch the artifacts (zero
	// after one succeeded).
	installWait time.Duration
	// lastRefused is the last refusal since the declaration applied: the
	// periodic reports say it again, so that a report made after it does
	// not hide it. The periodic reports are made on a goroutine of their
	// own: mu guards it.
	mu          sync.Mutex
	lastRefused string
}

// declarationBus is what reading and applying a declaration asks of
// the bus.
type declarationBus interface {
	plane.NodeReader
	plane.CredentialAsker
	plane.ArtifactFetcher
}

// declarations takes the node's newest declaration if it is to be
// applied, and reports what the node applied, or what it refused.
func (n *node) declarations(ctx context.Context, bus declarationBus) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := bus.Newest(rctx, n.name)
	if errors.Is(err, plane.ErrNoDeclaration) {
		return
	}
	was, aerr := n.state.Applied()
	if aerr != nil {
		n.log.Error("what was applied cannot be read", "err", aerr)
		return
	}
	if errors.Is(err, wire.ErrDeclaration) {
		// The bus refused what it read before anything could be named
		// by (a sequence the server did not write): said once per
		// reason.
		n.refuse(was, err.Error(), err.Error())
		return
	}
	if err != nil {
		n.log.Warn("the newest declaration cannot be read", "err", err)
		return
	}
	read := refusalOf(got)
	d, err := verify(n.key, n.name, got)
	switch {
	case err != nil:
		n.refuse(was, read, fmt.Sprintf("%s: %v", got.Where, err))
		return
	case wire.SameDeclaration(d, was.Declaration):
		// The one applied, read again, or published again (the
		// controller's guard putting it back after something else landed
		// there, a controller restarted signing it again from its store,
		// whose spelling of a configuration may differ): no refusal.
		return
	}
	if why := judge(was, d, got.Where); why != "" {
		n.refuse(was, read, why)
		return
	}
	if d.Move != nil && wire.BusOfScheme(n.cred.Scheme()) != d.Move.Bus {
		if !d.Move.Switch && read == n.refused {
			return // its prepare was refused already: a new declaration is needed
		}
		why, err := n.move(ctx, bus, d)
		if err != nil {
			n.log.Warn("the declaration waits to switch", "revision", d.Revision, "err", err)
			return
		}
		if why != "" {
			n.refuse(was, read, why)
			return
		}
	}
	if n.moved != nil {
		// Switched: the move kept every module's credential on the new
		// bus, as the controller answered for this declaration; asking
		// it again, on the bus being left, would only hold the node off
		// both buses a round trip longer (0.7 s of its 2 s at N = 200).
		if err := n.state.forgetUndeclared(d.Modules); err != nil {
			n.log.Warn("the declaration waits for its modules' credentials", "revision", d.Revision, "err", err)
			return
		}
	} else if err := fetchCredentials(rctx, bus, n.state, n.sealing, d, n.identity); err != nil {
		n.log.Warn("the declaration waits for its modules' credentials", "revision", d.Revision, "err", err)
		return
	}
	if len(d.Artifacts) > 0 {
		if read == n.refused {
			return // refused already: a new declaration is needed
		}
		// The first attempt is short (the beds' reload lands within a
		// second): the declaration may come a moment
		// before the server reloads the grant of its artifacts' chunks,
		// and a refused direct get is dropped with an asynchronous error,
		// so the request waits out its bound. Each failure doubles it.
		n.installWait = min(max(2*n.installWait, installFirst), installTimeout)
		ictx, cancel := context.WithTimeout(ctx, n.installWait)
		err := install(ictx, bus, n.state, n.sup != nil, d)
		cancel()
		if err == nil {
			n.installWait = 0
		}
		if errors.Is(err, ErrInstall) {
			n.refuse(was, read, fmt.Sprintf("revision %d (%s): %v", d.Revision, got.Where, err))
			return
		}
		if err != nil {
			n.log.Warn("the declaration waits for its artifacts", "revision", d.Revision, "err", err)
			return
		}
	}
	if n.sup != nil {
		if err := n.sup.set(d); err != nil {
			n.log.Warn("the declaration waits for its modules' programs", "revision", d.Revision, "err", err)
			return
		}
		n.sup.started(d.Modules, startWithin)
	}
	now := Applied{Declaration: d}
	if err := n.state.PutApplied(now); err != nil {
		n.log.Error("what was applied cannot be kept; the declaration is taken again", "err", err)
		return
	}
	n.refused = ""
	n.log.Info("declaration applied", "revision", d.Revision, "where", got.Where, "modules", d.Modules)
	n.report(now, "")
}

// refuse logs and reports a refusal of what, unless it was the last one
// said.
func (n *node) refuse(was Applied, what, why string) {
	if what == n.refused {
		return
	}
	n.refused = what
	n.log.Warn("declaration refused", "why", why)
	n.report(was, why)
}

// identity is the one module runs as, or nil when the host runs no
// module (its modules' files are then the host's alone).
func (n *node) identity(module string) (*Identity, error) {
	if n.sup == nil {
		return nil, nil
	}
	return n.sup.identity(module)
}

// credentialMissing says whether a module of d has no credential kept.
func (n *node) credentialMissing(d wire.Declaration) bool {
	for _, mod := range d.Modules {
		if _, err := os.Stat(n.state.ModuleCredential(mod)); err != nil {
			return true
		}
	}
	return false
}

func (n *node) lastRefusal() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastRefused
}

func (n *node) report(a Applied, refused string) {
	n.mu.Lock()
	n.lastRefused = refused
	n.mu.Unlock()
	var running map[string]string
	if n.sup != nil {
		running = n.sup.running()
	}
	r := reportOf(n.name, a, running, refused, time.Now(), wire.NewID())
	if in, err := n.state.Installed(); err == nil {
		for mod, digest := range in {
			if a.Declaration.Artifacts[mod].Digest == digest {
				if r.Installed == nil {
					r.Installed = map[string]string{}
				}
				r.Installed[mod] = digest
			}
		}
	}
	if err := n.out.add(r); err != nil {
		n.log.Error("report not kept", "err", err)
	}
}

// enrolOnce claims the token, asking again while the bus does not let the
// token's user in yet (its user is composed a moment after the token was
// issued) or is away, or closed the connection before the answer came
// (the same key is answered again), and keeps the credential it was
// given.
func enrolOnce(ctx context.Context, o Options) (wire.Credential, error) {
	data, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read the token: %w", err)
	}
	token, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read the token %s: %w", o.TokenFile, err)
	}
	key, err := o.State.SealingKey()
	if err != nil {
		return wire.Credential{}, err
	}
	var cred wire.Credential
	// No bound on an attempt but ctx: the answer may come after the
	// controller held the request for as long as its store was away. A
	// login refused is asked again for TokenRefusedFor, no longer.
	var refusedSince time.Time
	err = link.Retry(ctx, o.Logger, "enrol", 0, func(ctx context.Context) (bool, error) {
		cred, err = Enrol(ctx, token, key, o.Dial...)
		if !errors.Is(err, plane.ErrLoginRefused) {
			refusedSince = time.Time{}
			return errors.Is(err, ErrNotSent) || errors.Is(err, ErrNoAnswer), err
		}
		if refusedSince.IsZero() {
			refusedSince = time.Now()
		}
		if refused := time.Since(refusedSince); refused >= o.TokenRefusedFor {
			return false, fmt.Errorf("%w (its user %s refused at login for %s: %w)", ErrTokenRefused, token.User(), refused.Round(time.Second), err)
		}
		return true, err
	})
	if err != nil {
		return wire.Credential{}, err
	}
	return cred, o.State.PutCredential(cred)
}

// dialRetrying connects as the host on the bus its credential is for,
// asking again while the server has not yet loaded the host's new user
// (the retry is the host's, with its backoff and its log); the connection
// then reconnects by itself for as long as the host runs.
func dialRetrying(ctx context.Context, cred wire.Credential, o Options) (plane.Host, error) {
	opts := append([]link.Option{link.WithConnectionLog(o.Logger)}, o.Dial...)
	var bus plane.Host
	err := link.Retry(ctx, o.Logger, "connect", 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		bus, err = buses.DialHost(ctx, cred, opts...)
		return buses.DialAgain(err), err
	})
	return bus, err
}
