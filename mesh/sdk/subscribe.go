package sdk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

type subscription struct {
	id      int
	pattern string
	h       EventHandler
}

// Subscribe runs h for every event whose "<module>.<key>" matches pattern
// ("sensor.alarm.>"). The first Subscribe binds the consumer the mesh
// created for this module on this node; if there is none, it is
// ErrNoConsumer naming it. A module subscribing twice still has one
// consumer, whose filters are its manifest's consumes: the patterns
// decide locally which handlers run, and a pattern outside the consumes
// matches nothing the mesh delivers.
func (m *Module) Subscribe(pattern string, h EventHandler) error {
	if h == nil {
		return fmt.Errorf("subscribe %q: %w: nil handler", pattern, ErrInvalid)
	}
	if m.person {
		return errPerson("subscribe " + pattern)
	}
	source, keys, ok := strings.Cut(pattern, ".")
	if !ok {
		return fmt.Errorf("subscribe %q: %w: want <module>.<key pattern>", pattern, ErrInvalid)
	}
	if err := wire.CheckName(source); err != nil {
		return fmt.Errorf("subscribe %q: %w: %w", pattern, ErrInvalid, err)
	}
	if err := wire.CheckKeyPattern(keys); err != nil {
		return fmt.Errorf("subscribe %q: %w: %w", pattern, ErrInvalid, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.nextSub++
	id := m.nextSub
	m.subs = append(m.subs, subscription{id: id, pattern: pattern, h: h})
	m.settleBy = time.Now().Add(settleWindow)
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(m.ctx, m.timeout)
	defer cancel()
	if err := m.bus.Consume(ctx, pattern); err != nil {
		m.mu.Lock()
		m.subs = slices.DeleteFunc(m.subs, func(s subscription) bool { return s.id == id })
		m.mu.Unlock()
		return fmt.Errorf("subscribe %q: %w", pattern, err)
	}
	return nil
}

// handlers are those whose pattern matches key; closing reports whether
// the module is being closed.
func (m *Module) handlers(key string) (hs []EventHandler, closing bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.subs {
		if wire.MatchKey(s.pattern, key) {
			hs = append(hs, s.h)
		}
	}
	return hs, m.closed
}
