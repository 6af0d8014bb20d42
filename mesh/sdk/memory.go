package sdk

import "github.com/meshbus/mesh/mesh/wire"

// dedupMemory is how many handled events a module remembers. A
// redelivery comes within the consumer's ack wait times its deliveries,
// long before this many newer events have been handled by one module;
// the server's own duplicate window covers the publishing side. An
// event's id is at most wire.MaxIDBytes and its source a name, so the
// memory holds at most about 2.6 MB.
const dedupMemory = 16384

// seenEvent is what identifies an event: its id is made by its emitter,
// so only the emitter and the id together name one event. Keyed by the id
// alone, a module could make another's event look handled by emitting
// its id first.
type seenEvent struct{ source, id string }

// memory is a bounded set of handled events: past its size the oldest is
// forgotten first. It is used from the delivering goroutine only.
type memory struct {
	events map[seenEvent]struct{}
	ring   []seenEvent
	next   int
}

func newMemory(size int) *memory {
	return &memory{events: make(map[seenEvent]struct{}, size), ring: make([]seenEvent, size)}
}

func (m *memory) has(source, id string) bool {
	_, ok := m.events[seenEvent{source, id}]
	return ok
}

// add remembers an event already validated (wire.ValidateEvent): an id
// longer than wire.MaxIDBytes never reaches it.
func (m *memory) add(source, id string) {
	e := seenEvent{source, id}
	if _, ok := m.events[e]; ok || len(id) > wire.MaxIDBytes {
		return
	}
	if old := m.ring[m.next]; old != (seenEvent{}) {
		delete(m.events, old)
	}
	m.ring[m.next] = e
	m.events[e] = struct{}{}
	m.next = (m.next + 1) % len(m.ring)
}
