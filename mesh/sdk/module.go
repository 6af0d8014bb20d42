package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Module is one module's connection to the mesh, as its credential names
// it. Its methods are safe for concurrent use.
type Module struct {
	node, name string
	person     bool // a person's client: it only calls tools
	bus        link.Transport
	log        *slog.Logger
	timeout    time.Duration
	redelivery time.Duration // the first wait of a failed event (WithRedelivery)
	ctx        context.Context
	cancel     context.CancelFunc

	// The dispatcher: deliveries pass through in, one at a time, and are
	// handled on its goroutine only (dispatch.go).
	in                            chan link.Delivery
	handled, giveBack, stop, done chan struct{}
	held                          []link.Delivery
	seen                          *memory
	// refused counts the deliveries refused as no acceptable event, for
	// the log (dispatch.go's refuse).
	refused int

	mu       sync.Mutex
	subs     []subscription
	nextSub  int
	settleBy time.Time
	tools    map[string]bool
	closed   bool
}

// Connect reads the credential file (credentialPath, or the file
// wire.EnvCredential names when it is empty), refuses a bootstrap URL,
// takes node and module from the credential — overwriting wire.EnvNode
// and wire.EnvModule where they disagree — and connects through the
// binding the URL's scheme chooses, with the certificate pinned. Nothing
// is bound until the module subscribes. The connection lasts until Close:
// when the bus goes away the module reconnects, on either bus, and goes on
// consuming and serving.
//
// A person's credential connects too, on NATS, for the person's client
// (design 25 §7: the same contract, the same code path as a module's
// calls): such a Module calls tools (Request) and nothing else; Publish,
// Subscribe and Handle are ErrInvalid, and Node and Name are empty.
func Connect(ctx context.Context, credentialPath string, opts ...Option) (*Module, error) {
	c := config{log: slog.Default(), timeout: DefaultTimeout, redelivery: DefaultRedelivery}
	for _, o := range opts {
		o(&c)
	}
	cred, err := readCredential(credentialPath)
	if err != nil {
		return nil, err
	}
	dial, err := binding(cred.URL)
	if err != nil {
		return nil, err
	}
	if cred.Principal == wire.PrincipalModule {
		adoptIdentity(cred, c.log)
	}
	m := newModule(cred, c)
	m.bus, err = dial(ctx, link.Config{
		Credential: cred,
		Deliver:    m.deliver,
		Logger:     c.log,
		Timeout:    c.timeout,
		Context:    m.ctx,
	})
	if err != nil {
		m.stopDispatch()
		m.cancel()
		return nil, fmt.Errorf("connect %s: %w", who(cred), err)
	}
	return m, nil
}

// newModule is a module not yet connected to any bus, its dispatcher
// running.
func newModule(cred wire.Credential, c config) *Module {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Module{
		node: cred.Node, name: cred.Module, person: cred.Principal == wire.PrincipalPerson, log: c.log, timeout: c.timeout, redelivery: c.redelivery,
		ctx: ctx, cancel: cancel, tools: map[string]bool{}, seen: newMemory(dedupMemory),
		in: make(chan link.Delivery), handled: make(chan struct{}),
		giveBack: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go m.dispatch()
	return m
}

func readCredential(path string) (wire.Credential, error) {
	if path == "" {
		path = os.Getenv(wire.EnvCredential)
	}
	if path == "" {
		return wire.Credential{}, fmt.Errorf("read credential: %w: no path given and %s is empty", ErrInvalid, wire.EnvCredential)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read credential: %w", err)
	}
	cred, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read credential %s: %w", path, err)
	}
	if cred.Bootstrap {
		return wire.Credential{}, fmt.Errorf("read credential %s: %w", path, ErrBootstrap)
	}
	switch {
	case cred.Principal == wire.PrincipalModule:
	case cred.Principal == wire.PrincipalPerson && !strings.HasPrefix(cred.URL, "amqp"):
	case cred.Principal == wire.PrincipalPerson:
		return wire.Credential{}, fmt.Errorf("read credential %s: %w: a person's client speaks NATS (design 25 §7), not the AMQP bus", path, wire.ErrBadCredential)
	default:
		return wire.Credential{}, fmt.Errorf("read credential %s: %w: field principal: %q is neither a module nor a person", path, wire.ErrBadCredential, cred.Principal)
	}
	return cred, nil
}

// who names the credential's principal in messages.
func who(cred wire.Credential) string {
	if cred.Principal == wire.PrincipalPerson {
		return "person " + cred.Name
	}
	return cred.Module + " on " + cred.Node
}

// errPerson refuses what only a module does to a person's client.
func errPerson(what string) error {
	return fmt.Errorf("%s: %w: a person's client calls tools; it emits, consumes and serves nothing", what, ErrInvalid)
}

// binding chooses the binding by the URL's scheme.
func binding(rawURL string) (link.Dialer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("choose binding: %w", err)
	}
	switch u.Scheme {
	case "tls", "nats":
		return dialNATS, nil
	case "amqp", "amqps":
		return dialAMQP, nil
	}
	return nil, fmt.Errorf("choose binding: %w: scheme %q", ErrTransport, u.Scheme)
}

// adoptIdentity overwrites the identity variables with the credential's,
// so that nothing in the module's process can read another identity than
// the one the mesh authorised (design 19, "Identity").
func adoptIdentity(cred wire.Credential, log *slog.Logger) {
	for name, want := range map[string]string{wire.EnvNode: cred.Node, wire.EnvModule: cred.Module} {
		got, set := os.LookupEnv(name)
		if got == want {
			continue
		}
		if set && got != "" {
			log.Warn("environment disagrees with the credential; the credential wins", "variable", name, "environment", got, "credential", want)
		}
		if err := os.Setenv(name, want); err != nil {
			log.Error("overwrite environment", "variable", name, "err", err)
		}
	}
}

// Node is the machine the module's credential was issued for.
func (m *Module) Node() string { return m.node }

// Name is the module the credential was issued for.
func (m *Module) Name() string { return m.name }

// Close gives back the deliveries it was holding for a Subscribe yet to
// come, stops fetching events, lets the handlers running finish and
// settle, answers the tool calls in flight, and closes the connection.
// Calls after Close return ErrClosed.
func (m *Module) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	select {
	case m.giveBack <- struct{}{}:
	case <-time.After(m.timeout):
		// A handler is still running; the drain below waits for it too.
	}
	err := m.bus.Close()
	m.stopDispatch()
	m.cancel()
	if err != nil {
		return fmt.Errorf("close %s: %w", m.name, err)
	}
	return nil
}

func (m *Module) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// bounded gives ctx the module's timeout when it has no deadline.
func (m *Module) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, m.timeout)
}
