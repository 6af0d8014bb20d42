package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/wire"
)

// How the file store keeps the registry (issue 18): registry.json is the
// registry whole as of some update, and registry.journal the updates
// since, one line each, appended and fsynced as the update's commit. An
// update so costs what it writes, not what the registry holds: before,
// each one rewrote and fsynced the whole document, and the ledger grew
// with every message ever applied, so the CONTROL loop slowed as it went
// (40 messages a second falling to 8 at 559 KB).
//
// Each line holds every registry write of its update, so an effect and
// its ledger entry are still one atomic write. A line is whole or not
// there: a crash mid-append leaves a tail without its newline, which is
// not the update's (its commit had not returned) and is cut off before the
// next append. Every write is a put or a removal by key, so replaying a
// line twice changes nothing: the journal is folded into registry.json
// (compact) by writing that whole, then starting an empty journal, each
// by an atomic rename, and a crash between the two leaves a journal whose
// replay over the new registry.json gives the same registry.
//
// The registry is kept in memory between calls (regCache) and brought up
// to date from the files before each use: an update holds the lock every
// writer holds, so what it reads is current; a read outside an update
// reads the files as another process may be writing them, which is safe
// because lines are only ever appended whole and registry.json and the
// journal are only ever replaced by renames, which a read notices (it
// reads again).

// compactAt is the journal's size past which it is folded into
// registry.json, unless registry.json is larger: the fold costs the
// registry's size, so folding only once the journal has grown as large
// keeps an update's cost, amortised, independent of the registry's.
const compactAt = 1 << 20

// registryVersion is the registry.json written since issue 18: its
// ledger entries carry their sequence. An older one's message entries
// are taken as of sequence 1 (legacySeq).
const registryVersion = 1

// regState is the registry in memory, each record by its key.
type regState struct {
	tokens      map[string]Token
	nodes       map[string]Node
	ledger      map[string]Applied
	declared    map[string]wire.Declaration
	description []byte
	reports     map[string]Reported
	liveness    Liveness
	dead        map[string]DeadLetter // by DeadLetter.Key
	refusals    Refusals
	persons     map[string]Person
	builds      map[string]Build
	seats       map[string]Seat
	compat      *Compat
	cutover     *Cutover
}

func newRegState() *regState {
	return &regState{
		tokens: map[string]Token{}, nodes: map[string]Node{}, ledger: map[string]Applied{},
		declared: map[string]wire.Declaration{}, reports: map[string]Reported{}, dead: map[string]DeadLetter{},
		persons: map[string]Person{}, builds: map[string]Build{}, seats: map[string]Seat{},
	}
}

// fromRegistry is the registry document r in memory.
func fromRegistry(r registry) *regState {
	st := newRegState()
	for _, t := range r.Tokens {
		st.tokens[t.ID] = t
	}
	for _, n := range r.Nodes {
		st.nodes[n.Name] = n
	}
	for _, a := range r.Ledger {
		if r.Version < registryVersion && a.Seq == 0 {
			a.Seq = legacySeq(a.Key)
		}
		st.ledger[a.Key] = a
	}
	for _, d := range r.Declared {
		st.declared[d.Node] = d
	}
	st.description = r.Description
	for _, rep := range r.Reports {
		st.reports[rep.Report.Node] = rep
	}
	st.liveness = r.Liveness
	for _, d := range r.Dead {
		st.dead[d.Key()] = d
	}
	st.refusals = r.Refusals
	for _, p := range r.Persons {
		st.persons[p.Name] = p
	}
	for _, b := range r.Builds {
		st.builds[b.ID] = b
	}
	for _, s := range r.Seats {
		st.seats[s.Name] = s
	}
	st.compat = r.Compat
	st.cutover = r.Cutover
	return st
}

// document is st as registry.json holds it.
func (st *regState) document() registry {
	return registry{
		Version:     registryVersion,
		Tokens:      slices.Collect(maps.Values(st.tokens)),
		Nodes:       slices.Collect(maps.Values(st.nodes)),
		Ledger:      slices.Collect(maps.Values(st.ledger)),
		Declared:    slices.Collect(maps.Values(st.declared)),
		Description: st.description,
		Reports:     slices.Collect(maps.Values(st.reports)),
		Liveness:    st.liveness,
		Dead:        slices.Collect(maps.Values(st.dead)),
		Refusals:    st.refusals,
		Persons:     slices.Collect(maps.Values(st.persons)),
		Builds:      slices.Collect(maps.Values(st.builds)),
		Seats:       slices.Collect(maps.Values(st.seats)),
		Compat:      st.compat,
		Cutover:     st.cutover,
	}
}

// regOp is one registry write of an update, as the journal holds it: one
// field set, a put or a removal by key.
type regOp struct {
	Token       *Token            `json:"token,omitempty"`
	Node        *Node             `json:"node,omitempty"`
	Applied     *Applied          `json:"applied,omitempty"`
	Forget      []string          `json:"forget,omitempty"` // ledger keys pruned
	Declared    *wire.Declaration `json:"declared,omitempty"`
	Undeclared  string            `json:"undeclared,omitempty"`
	Description []byte            `json:"description,omitempty"`
	Report      *Reported         `json:"report,omitempty"`
	Liveness    *Liveness         `json:"liveness,omitempty"`
	Dead        *DeadLetter       `json:"dead,omitempty"`
	Refusals    *Refusals         `json:"refusals,omitempty"`
	Person      *Person           `json:"person,omitempty"`
	Unperson    string            `json:"unperson,omitempty"`
	Build       *Build            `json:"build,omitempty"`
	Seat        *Seat             `json:"seat,omitempty"`
	Compat      *Compat           `json:"compat,omitempty"`
	Cutover     *Cutover          `json:"cutover,omitempty"`
}

// journalLine is one update's registry writes, one line of the journal.
type journalLine struct {
	Ops []regOp `json:"ops"`
}

// apply makes op on st.
func (st *regState) apply(op regOp) {
	switch {
	case op.Token != nil:
		st.tokens[op.Token.ID] = *op.Token
	case op.Node != nil:
		st.nodes[op.Node.Name] = *op.Node
	case op.Applied != nil:
		st.ledger[op.Applied.Key] = *op.Applied
	case op.Forget != nil:
		for _, k := range op.Forget {
			delete(st.ledger, k)
		}
	case op.Declared != nil:
		st.declared[op.Declared.Node] = *op.Declared
	case op.Undeclared != "":
		delete(st.declared, op.Undeclared)
	case op.Description != nil:
		st.description = op.Description
	case op.Report != nil:
		st.reports[op.Report.Report.Node] = *op.Report
	case op.Liveness != nil:
		st.liveness = *op.Liveness
	case op.Dead != nil:
		st.dead[op.Dead.Key()] = *op.Dead
	case op.Refusals != nil:
		st.refusals = *op.Refusals
	case op.Person != nil:
		st.persons[op.Person.Name] = *op.Person
	case op.Unperson != "":
		delete(st.persons, op.Unperson)
	case op.Build != nil:
		st.builds[op.Build.ID] = *op.Build
	case op.Seat != nil:
		st.seats[op.Seat.Name] = *op.Seat
	case op.Compat != nil:
		c := copyCompat(*op.Compat)
		st.compat = &c
	case op.Cutover != nil:
		c := copyCutover(*op.Cutover)
		st.cutover = &c
	}
}

// fileID is what tells one version of a file from the next: a rename
// puts another file in place, an append grows it.
type fileID struct {
	fi   fs.FileInfo // nil: absent
	size int64
	mod  time.Time
}

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if absent(err) {
		return fileID{}, nil
	}
	if err != nil {
		return fileID{}, fileErr(err)
	}
	return fileID{fi: fi, size: fi.Size(), mod: fi.ModTime()}, nil
}

func (a fileID) same(b fileID) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.size == b.size && a.mod.Equal(b.mod)
}

// regCache is a handle's registry in memory and how far it has read the
// files. mu guards it all: the state is changed in place by a refresh
// and a commit, and read under mu by every view.
type regCache struct {
	mu       sync.Mutex
	l        statedir.Layout
	st       *regState
	snapshot fileID // registry.json as read
	journal  fileID // the journal as last seen
	off      int64  // the end of the last whole line read
	torn     bool   // bytes past off that are no whole line
	loaded   bool
	// compactAt is the journal's size past which it is folded; 0 is
	// the constant compactAt (a test folds sooner).
	compactAt int64
}

// view runs f on the registry with ops on top, under mu; refreshed from
// the files first unless the caller holds the update lock and has.
func (c *regCache) view(ops []regOp, refresh bool, f func(regView)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if refresh || !c.loaded {
		if err := c.refresh(); err != nil {
			return err
		}
	}
	f(regView{base: c.st, ops: ops})
	return nil
}

// refresh brings c up to date with the files. Called with c.mu held.
// The journal's new lines are applied to the state in place: every write
// is a put or a removal by key, so lines applied by a read that then
// fails, and applied again by the next, leave the same state.
func (c *regCache) refresh() error {
	for range 8 {
		snap, err := statID(c.l.Registry())
		if err != nil {
			return fmt.Errorf("read registry: %w", err)
		}
		jnl, err := statID(c.l.RegistryJournal())
		if err != nil {
			return fmt.Errorf("read registry: %w", err)
		}
		full := !c.loaded || !snap.same(c.snapshot) ||
			jnl.fi == nil && c.journal.fi != nil ||
			jnl.fi != nil && (c.journal.fi == nil || !os.SameFile(jnl.fi, c.journal.fi) || jnl.size < c.off)
		if !full && (jnl.fi == nil || jnl.size == c.journal.size) {
			return nil // nothing appended since
		}
		if full {
			st, err := readSnapshot(c.l.Registry())
			if err != nil {
				return err
			}
			c.loaded, c.st, c.off, c.torn = false, st, 0, false
		}
		end, torn, err := replay(c.l.RegistryJournal(), c.off, c.st)
		if err != nil {
			c.loaded = false
			return err
		}
		// registry.json replaced while the journal was read (another
		// process compacting): the journal read may be the new one,
		// which the old registry.json does not hold; read both again.
		again, err := statID(c.l.Registry())
		if err != nil {
			c.loaded = false
			return fmt.Errorf("read registry: %w", err)
		}
		if !again.same(snap) {
			c.loaded = false
			continue
		}
		c.snapshot, c.journal, c.off, c.torn, c.loaded = snap, jnl, end, torn, true
		return nil
	}
	return errors.New("read registry: it kept being replaced while read")
}

// readSnapshot reads registry.json; an absent one is the empty registry.
func readSnapshot(path string) (*regState, error) {
	data, err := os.ReadFile(path)
	if absent(err) {
		return newRegState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read registry: %w", fileErr(err))
	}
	r, err := parseRegistry(data, path)
	if err != nil {
		return nil, err
	}
	return fromRegistry(r), nil
}

// replay applies the journal's whole lines from off on to st, and says
// where the last one ends and whether bytes that are no whole line follow
// (a torn append).
func replay(path string, off int64, st *regState) (end int64, torn bool, err error) {
	f, err := os.Open(path)
	if absent(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read registry journal: %w", fileErr(err))
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, false, fmt.Errorf("read registry journal: %w", fileErr(err))
	}
	r := bufio.NewReaderSize(f, 64<<10)
	end = off
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return end, len(line) > 0, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("read registry journal: %w", fileErr(err))
		}
		var jl journalLine
		if err := json.Unmarshal(line, &jl); err != nil {
			// A whole line that does not read was not written by a torn
			// append (that leaves no newline): the file is damaged.
			return 0, false, fmt.Errorf("read registry journal %s at byte %d: %w", path, end, err)
		}
		for _, op := range jl.Ops {
			st.apply(op)
		}
		end += int64(len(line))
	}
}

// appendJournal commits one update's registry writes: one line appended
// and fsynced. Called with c.mu held and c fresh (under the update's
// lock). On failure the journal is cut back to where it was, and the
// cache is unchanged.
func (c *regCache) appendJournal(ops []regOp, sync func(dir string) error) error {
	line, err := json.Marshal(journalLine{Ops: collapse(ops)})
	if err != nil {
		return fmt.Errorf("write registry journal: %w", err)
	}
	line = append(line, '\n')
	path := c.l.RegistryJournal()
	created := c.journal.fi == nil
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("write registry journal: %w", fileErr(err))
	}
	defer f.Close()
	// A torn tail is cut off first: the line goes right after the last
	// whole one.
	if c.torn {
		if err := f.Truncate(c.off); err != nil {
			return fmt.Errorf("write registry journal: %w", fileErr(err))
		}
	}
	_, err = f.WriteAt(line, c.off)
	if err == nil {
		err = f.Sync()
	}
	if err == nil && created {
		err = sync(c.l.Dir)
	}
	if err != nil {
		_ = f.Truncate(c.off)
		return fmt.Errorf("write registry journal: %w", fileErr(err))
	}
	for _, op := range ops {
		c.st.apply(op)
	}
	fi, err := f.Stat()
	if err != nil {
		// Committed; the next refresh reads the files whole.
		c.loaded = false
		return nil
	}
	c.off += int64(len(line))
	c.journal, c.torn = fileID{fi: fi, size: fi.Size(), mod: fi.ModTime()}, false
	return nil
}

// compact folds the journal into registry.json once it has grown past
// compactAt and registry.json's size. Called with c.mu held, after a
// commit. A failure leaves the journal as it was, and is no failure of
// the update, which committed.
func (c *regCache) compact(sync func(dir string) error) error {
	bound := c.compactAt
	if bound == 0 {
		bound = compactAt
	}
	if c.off < max(bound, c.snapshot.size) {
		return nil
	}
	doc := c.st.document().marshal()
	if _, err := atomicfile.Write(c.l.Registry(), doc, 0o600, sync); err != nil {
		return fmt.Errorf("compact registry: %w", fileErr(err))
	}
	if _, err := atomicfile.Write(c.l.RegistryJournal(), []byte{}, 0o600, sync); err != nil {
		// registry.json holds everything; the journal replays over it
		// to the same registry.
		c.loaded = false
		return fmt.Errorf("compact registry: %w", fileErr(err))
	}
	c.loaded = false
	return c.refresh()
}

// legacySeq is the sequence an entry of a registry.json or a ledger
// table written before issue 18 is taken to have: 1 for a message's entry
// (its key is LedgerKey's), so that it is pruned as soon as it is old
// enough, and 0 (kept) for any other (a token's answer).
func legacySeq(key string) uint64 {
	if strings.HasPrefix(key, "seq:") || strings.Contains(key, " id:") {
		return 1
	}
	return 0
}

// collapse drops each write of a single record (the refusals, the
// liveness, the description) that a later one of the same update
// replaces: a batch of refusals is one line with the refusals once, not
// once a message.
func collapse(ops []regOp) []regOp {
	last := map[string]int{}
	kind := func(op regOp) string {
		switch {
		case op.Refusals != nil:
			return "refusals"
		case op.Liveness != nil:
			return "liveness"
		case op.Description != nil:
			return "description"
		}
		return ""
	}
	for i, op := range ops {
		if k := kind(op); k != "" {
			last[k] = i
		}
	}
	if len(last) == 0 {
		return ops
	}
	out := make([]regOp, 0, len(ops))
	for i, op := range ops {
		if k := kind(op); k == "" || last[k] == i {
			out = append(out, op)
		}
	}
	return out
}
