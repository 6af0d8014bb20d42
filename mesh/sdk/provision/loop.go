package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Config.
const (
	DefaultInterval  = 30 * time.Second
	DefaultOpTimeout = 30 * time.Second
)

// maxOutbox bounds the events kept while the bus refuses them; past it the
// oldest are dropped, because a provider must keep provisioning whatever
// the bus does.
const maxOutbox = 1024

// Config configures a Loop.
type Config struct {
	// Path is the contributions file.
	Path string
	// Provider is the module's own backend.
	Provider Provider
	// Publisher publishes the loop's events.
	Publisher Publisher
	// Interval is the time between passes; DefaultInterval when zero.
	Interval time.Duration
	// OpTimeout bounds each call to the Provider and each publish;
	// DefaultOpTimeout when zero.
	OpTimeout time.Duration
	// Logger receives the loop's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// Loop is the provider loop: passes that read the contributions file,
// create and check what is asked for, retire what is not, and say which
// consumer it keeps failing. Its passes and its tools run one at a time.
type Loop struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	m        *machine
	grants   []Grant // the latest good reading
	haveRead bool
	outbox   []outgoing
}

type outgoing struct {
	key  string
	body []byte
}

// New makes a Loop; nothing runs until Run or Pass.
func New(cfg Config) (*Loop, error) {
	switch {
	case cfg.Path == "":
		return nil, errors.New("new provision loop: no contributions path")
	case cfg.Provider == nil:
		return nil, errors.New("new provision loop: no provider")
	case cfg.Publisher == nil:
		return nil, errors.New("new provision loop: no publisher")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Loop{cfg: cfg, log: log, m: newMachine()}, nil
}

// Run makes a pass now and then every Interval until ctx ends, and returns
// ctx's error. A pass's trouble is logged, never fatal: the loop's job is
// to keep trying and to say when it keeps failing.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if err := l.Pass(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("provision pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Pass makes one pass: it reads the contributions file and the backend's
// holdings, ensures or checks each consumer asked for, retires what the
// rules say, and publishes what follows. It returns what kept it from
// reading; a consumer's failure is not the pass's error but an event. A
// pass that cannot read the file keeps working from the last good reading
// and does not count toward retirement.
func (l *Loop) Pass(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	grants, err := ReadGrants(l.cfg.Path)
	if err == nil {
		l.grants, l.haveRead = grants, true
	} else {
		errs = append(errs, err)
	}
	readOK := err == nil
	heldErr := l.refreshHeld(ctx)
	if heldErr != nil {
		errs = append(errs, heldErr)
	}
	if l.haveRead {
		ops, evs := l.m.pass(time.Now(), l.grants, readOK && heldErr == nil)
		l.enqueue(evs)
		results := l.call(ctx, ops)
		now := time.Now()
		l.enqueue(l.m.settle(now, results))
		l.enqueue(l.m.announce(now))
	}
	l.flush(ctx)
	return errors.Join(errs...)
}

func (l *Loop) refreshHeld(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	list, err := l.cfg.Provider.Held(octx)
	if err != nil {
		return fmt.Errorf("list held consumers: %w", err)
	}
	l.m.held(list)
	return nil
}

// call makes the machine's calls on the Provider. A call cut short by the
// end of ctx says nothing about the consumer, so it is not reported.
func (l *Loop) call(ctx context.Context, ops []op) []result {
	results := make([]result, 0, len(ops))
	for _, o := range ops {
		if ctx.Err() != nil {
			break
		}
		octx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
		r := result{op: o}
		switch o.kind {
		case opEnsure:
			r.err = l.cfg.Provider.Ensure(octx, o.grant)
		case opCheck:
			r.err = l.cfg.Provider.Check(octx, o.grant)
		case opRetire:
			r.err = l.cfg.Provider.Disable(octx, o.consumer)
			if errors.Is(r.err, ErrNoDisable) {
				r.accessKept, r.err = true, nil
			}
			if r.err == nil {
				mk := o.mark
				mk.AccessKept = r.accessKept
				r.err = l.cfg.Provider.Mark(octx, o.consumer, mk)
			}
		}
		cancel()
		if r.err != nil && ctx.Err() != nil {
			break
		}
		if r.err != nil {
			l.log.Warn("provision call failed", "op", o.kind.String(), "consumer", o.consumer,
				"class", Classify(r.err), "err", r.err)
		}
		results = append(results, r)
	}
	return results
}

func (k opKind) String() string {
	switch k {
	case opEnsure:
		return "ensure"
	case opCheck:
		return "check"
	case opRetire:
		return "retire"
	}
	return "unknown"
}

func (l *Loop) enqueue(evs []event) {
	for _, e := range evs {
		body, err := json.Marshal(e.body)
		if err != nil {
			// The bodies are wire's own types; failing to encode one is a bug.
			l.log.Error("encode event", "key", e.key, "err", err)
			continue
		}
		l.outbox = append(l.outbox, outgoing{e.key, body})
	}
	if n := len(l.outbox) - maxOutbox; n > 0 {
		l.log.Warn("events dropped: the bus refused them too long", "dropped", n)
		l.outbox = append([]outgoing(nil), l.outbox[n:]...)
	}
}

// flush publishes the outbox in order; what the bus refuses waits for the
// next pass, so that a failing word is late rather than lost.
func (l *Loop) flush(ctx context.Context) {
	for len(l.outbox) > 0 {
		e := l.outbox[0]
		octx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
		err := l.cfg.Publisher.Publish(octx, e.key, e.body)
		cancel()
		if err != nil {
			l.log.Warn("publish provisioner event", "key", e.key, "waiting", len(l.outbox), "err", err)
			return
		}
		l.outbox = l.outbox[1:]
	}
}
