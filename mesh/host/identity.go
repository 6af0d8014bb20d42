package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Identity is the OS user and group a module's process runs as: one of
// its own, so that the host's state, the node's sealing key and the
// other modules' credentials are files it cannot read (ADR 0047, issue
// 18). The group is the module's alone too: it is how the module reads
// the files the host keeps for it.
type Identity struct {
	UID, GID uint32
}

// IDRange is the span of user and group ids the host allots its modules
// from, one each, the same number for both.
type IDRange struct {
	First, Last uint32
}

// DefaultIDRange is where a host allots its modules' ids unless told
// otherwise (mesh-host --module-ids): above the ids a Debian machine
// gives its first users and below the 60000-64999 it reserves. The
// operator keeps the span free of the machine's own users; the host
// makes sure no two modules share an id.
var DefaultIDRange = IDRange{First: 50000, Last: 59999}

// String is the span as ParseIDRange reads it.
func (r IDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// ParseIDRange reads "FIRST-LAST": ids above 0 (root is never a
// module), FIRST not above LAST.
func ParseIDRange(s string) (IDRange, error) {
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return IDRange{}, fmt.Errorf("module ids %q: want FIRST-LAST, such as %s", s, DefaultIDRange)
	}
	f, err1 := strconv.ParseUint(first, 10, 32)
	l, err2 := strconv.ParseUint(last, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return IDRange{}, fmt.Errorf("module ids %q: want FIRST-LAST, such as %s: %w", s, DefaultIDRange, err)
	}
	r := IDRange{First: uint32(f), Last: uint32(l)}
	if r.First == 0 || r.First > r.Last {
		return IDRange{}, fmt.Errorf("module ids %q: FIRST must be above 0 and not above LAST", s)
	}
	return r, nil
}

// identitiesFile keeps the ids allotted, by module.
const identitiesFile = "identities.json"

// identities allots each module an id of its own from span, kept in the
// host's state so that a module has the same one across restarts of the
// host and of itself (what it left in its home stays its own). An id
// once allotted is never given to another module, even after its own is
// no longer declared: its home may still hold its files.
type identities struct {
	state State
	span  IDRange
	mu    sync.Mutex
}

// of is module's identity, allotted now if it has none: the allotment
// is kept before it is used, so a host killed in between finds the same
// one again.
func (ids *identities) of(module string) (Identity, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	all, err := ids.read()
	if err != nil {
		return Identity{}, err
	}
	if id, ok := all[module]; ok {
		return Identity{UID: id, GID: id}, nil
	}
	taken := slices.Collect(maps.Values(all))
	for id := ids.span.First; ; id++ {
		if !slices.Contains(taken, id) {
			all[module] = id
			b, _ := json.Marshal(all)
			if err := ids.state.write(identitiesFile, b); err != nil {
				return Identity{}, fmt.Errorf("allot module %s an id: %w", module, err)
			}
			return Identity{UID: id, GID: id}, nil
		}
		if id == ids.span.Last {
			return Identity{}, fmt.Errorf("allot module %s an id: all %d ids of %s are allotted (%s); give the host a wider span (--module-ids)", module, ids.span.Last-ids.span.First+1, ids.span, identitiesFile)
		}
	}
}

// read is the allotment kept, checked: every id in the span, none given
// twice.
func (ids *identities) read() (map[string]uint32, error) {
	data, err := ids.state.read(identitiesFile)
	if errors.Is(err, ErrNoState) {
		return map[string]uint32{}, nil
	}
	if err != nil {
		return nil, err
	}
	all := map[string]uint32{}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("host state: %s: %w", identitiesFile, err)
	}
	seen := map[uint32]string{}
	for _, mod := range slices.Sorted(maps.Keys(all)) {
		id := all[mod]
		if id < ids.span.First || id > ids.span.Last {
			return nil, fmt.Errorf("host state: %s: module %s has id %d, outside the span %s the host allots from; widen --module-ids or remove its entry to allot it anew", identitiesFile, mod, id, ids.span)
		}
		if other, ok := seen[id]; ok {
			return nil, fmt.Errorf("host state: %s: modules %s and %s have the same id %d", identitiesFile, other, mod, id)
		}
		seen[id] = mod
	}
	return all, nil
}
