package sdk

// dedupMemory is how many handled event ids a module remembers. A
// redelivery comes within the consumer's ack wait times its deliveries,
// long before this many newer events have been handled by one module;
// the server's own duplicate window covers the publishing side.
const dedupMemory = 16384

// memory is a bounded set of handled event ids: past its size the oldest
// is forgotten first. It is used from the delivering goroutine only.
type memory struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newMemory(size int) *memory {
	return &memory{ids: make(map[string]struct{}, size), ring: make([]string, size)}
}

func (m *memory) has(id string) bool {
	_, ok := m.ids[id]
	return ok
}

func (m *memory) add(id string) {
	if m.has(id) {
		return
	}
	if old := m.ring[m.next]; old != "" {
		delete(m.ids, old)
	}
	m.ring[m.next] = id
	m.ids[id] = struct{}{}
	m.next = (m.next + 1) % len(m.ring)
}
