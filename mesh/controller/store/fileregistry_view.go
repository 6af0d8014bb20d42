package store

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// How the file store's registry is read: the registry in memory
// (fileregistry.go) with an update's writes on top, and what a read
// returns copied out of it.
// regView reads the registry: base as the files hold it, with an
// update's writes so far (ops) on top.
type regView struct {
	base *regState
	ops  []regOp
}

// overlay is m with the ops' writes of one kind on top, sorted by key.
// What it returns shares nothing with the registry in memory (copy): a
// caller may change it, as it may what PostgreSQL returns.
func overlay[K cmp.Ordered, V any](m map[K]V, ops []regOp, put func(regOp) (K, *V, bool), copy func(V) V) []V {
	out := maps.Clone(m)
	for _, op := range ops {
		if k, v, ok := put(op); ok {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = *v
			}
		}
	}
	vs := make([]V, 0, len(out))
	for _, k := range slices.Sorted(maps.Keys(out)) {
		vs = append(vs, copy(out[k]))
	}
	return vs
}

func (v regView) tokens() []Token {
	return overlay(v.base.tokens, v.ops, func(op regOp) (string, *Token, bool) {
		if op.Token == nil {
			return "", nil, false
		}
		return op.Token.ID, op.Token, true
	}, asIs[Token])
}

func (v regView) nodes() []Node {
	return overlay(v.base.nodes, v.ops, func(op regOp) (string, *Node, bool) {
		if op.Node == nil {
			return "", nil, false
		}
		return op.Node.Name, op.Node, true
	}, asIs[Node])
}

func (v regView) declared() []wire.Declaration {
	return overlay(v.base.declared, v.ops, func(op regOp) (string, *wire.Declaration, bool) {
		switch {
		case op.Declared != nil:
			return op.Declared.Node, op.Declared, true
		case op.Undeclared != "":
			return op.Undeclared, nil, true
		}
		return "", nil, false
	}, copyDeclaration)
}

func (v regView) reports() []Reported {
	return overlay(v.base.reports, v.ops, func(op regOp) (string, *Reported, bool) {
		if op.Report == nil {
			return "", nil, false
		}
		return op.Report.Report.Node, op.Report, true
	}, copyReported)
}

func (v regView) dead() []DeadLetter {
	ds := overlay(v.base.dead, v.ops, func(op regOp) (string, *DeadLetter, bool) {
		if op.Dead == nil {
			return "", nil, false
		}
		return op.Dead.Key(), op.Dead, true
	}, asIs[DeadLetter])
	SortDeadLetters(ds)
	return ds
}

func (v regView) persons() []Person {
	return overlay(v.base.persons, v.ops, func(op regOp) (string, *Person, bool) {
		switch {
		case op.Person != nil:
			return op.Person.Name, op.Person, true
		case op.Unperson != "":
			return op.Unperson, nil, true
		}
		return "", nil, false
	}, copyPerson)
}

func (v regView) compatRecord() (Compat, bool) {
	for i := len(v.ops) - 1; i >= 0; i-- {
		if v.ops[i].Compat != nil {
			return copyCompat(*v.ops[i].Compat), true
		}
	}
	if v.base.compat == nil {
		return Compat{}, false
	}
	return copyCompat(*v.base.compat), true
}

func (v regView) cutoverRecord() (Cutover, bool) {
	for i := len(v.ops) - 1; i >= 0; i-- {
		if v.ops[i].Cutover != nil {
			return copyCutover(*v.ops[i].Cutover), true
		}
	}
	if v.base.cutover == nil {
		return Cutover{}, false
	}
	return copyCutover(*v.base.cutover), true
}

func (v regView) seats() []Seat {
	ss := overlay(v.base.seats, v.ops, func(op regOp) (string, *Seat, bool) {
		if op.Seat == nil {
			return "", nil, false
		}
		return op.Seat.Name, op.Seat, true
	}, copySeat)
	slices.SortFunc(ss, func(a, b Seat) int { return strings.Compare(a.Name, b.Name) })
	return ss
}

func (v regView) builds() []Build {
	return overlay(v.base.builds, v.ops, func(op regOp) (string, *Build, bool) {
		if op.Build == nil {
			return "", nil, false
		}
		return op.Build.ID, op.Build, true
	}, asIs[Build])
}

// applied is the ledger's entry of key, the update's own writes first.
func (v regView) applied(key string) (Applied, bool) {
	for i := len(v.ops) - 1; i >= 0; i-- {
		op := v.ops[i]
		if op.Applied != nil && op.Applied.Key == key {
			return copyApplied(*op.Applied), true
		}
		if slices.Contains(op.Forget, key) {
			return Applied{}, false
		}
	}
	a, ok := v.base.ledger[key]
	return copyApplied(a), ok
}

// ledgerLen counts the ledger's entries with the update's writes.
func (v regView) ledgerLen() int {
	n := len(v.base.ledger)
	seen := map[string]bool{}
	for i := len(v.ops) - 1; i >= 0; i-- {
		op := v.ops[i]
		var keys []string
		present := false
		switch {
		case op.Applied != nil:
			keys, present = []string{op.Applied.Key}, true
		case op.Forget != nil:
			keys = op.Forget
		}
		for _, k := range keys {
			if seen[k] {
				continue
			}
			seen[k] = true
			_, was := v.base.ledger[k]
			switch {
			case present && !was:
				n++
			case !present && was:
				n--
			}
		}
	}
	return n
}

// prunable are the ledger's keys PruneLedger forgets: as the update sees
// the ledger.
func (v regView) prunable(below uint64, before time.Time) []string {
	var keys []string
	consider := func(a Applied) {
		if a.Seq != 0 && a.Seq < below && a.At.Before(before) {
			keys = append(keys, a.Key)
		}
	}
	touched := map[string]bool{}
	for _, op := range v.ops {
		if op.Applied != nil {
			touched[op.Applied.Key] = true
		}
		for _, k := range op.Forget {
			touched[k] = true
		}
	}
	for k, a := range v.base.ledger {
		if !touched[k] {
			consider(a)
		}
	}
	for k := range touched {
		if a, ok := v.applied(k); ok {
			consider(a)
		}
	}
	slices.Sort(keys)
	return keys
}

// description and the single records, the update's writes first.
func (v regView) description() []byte {
	for i := len(v.ops) - 1; i >= 0; i-- {
		if v.ops[i].Description != nil {
			return slices.Clone(v.ops[i].Description)
		}
	}
	return slices.Clone(v.base.description)
}

func (v regView) livenessRecord() Liveness {
	for i := len(v.ops) - 1; i >= 0; i-- {
		if v.ops[i].Liveness != nil {
			return copyLiveness(*v.ops[i].Liveness)
		}
	}
	return copyLiveness(v.base.liveness)
}

func (v regView) refusalsRecord() Refusals {
	for i := len(v.ops) - 1; i >= 0; i-- {
		if v.ops[i].Refusals != nil {
			return copyRefusals(*v.ops[i].Refusals)
		}
	}
	return copyRefusals(v.base.refusals)
}

// The copies a read returns and a write keeps, so that the registry in
// memory shares no map or slice with a caller: the records' own maps and
// slices are copied, their scalars are values already.

func asIs[V any](v V) V { return v }

func copyDeclaration(d wire.Declaration) wire.Declaration {
	d.Modules, d.Versions = slices.Clone(d.Modules), maps.Clone(d.Versions)
	d.Config, d.Artifacts = maps.Clone(d.Config), maps.Clone(d.Artifacts)
	return d
}

func copyReported(r Reported) Reported {
	r.Report.Running, r.Report.Installed = maps.Clone(r.Report.Running), maps.Clone(r.Report.Installed)
	return r
}

func copyPerson(p Person) Person {
	p.Tools = slices.Clone(p.Tools)
	return p
}

func copyApplied(a Applied) Applied {
	a.Outcome = slices.Clone(a.Outcome)
	return a
}

func copyLiveness(l Liveness) Liveness {
	l.Heard = maps.Clone(l.Heard)
	return l
}

func copyRefusals(r Refusals) Refusals {
	r.Counts, r.Last = maps.Clone(r.Counts), slices.Clone(r.Last)
	return r
}

// copyOp is op as the update keeps it: sharing nothing with the caller
// that wrote it.
func copyOp(op regOp) regOp {
	switch {
	case op.Applied != nil:
		a := copyApplied(*op.Applied)
		op.Applied = &a
	case op.Forget != nil:
		op.Forget = slices.Clone(op.Forget)
	case op.Declared != nil:
		d := copyDeclaration(*op.Declared)
		op.Declared = &d
	case op.Description != nil:
		op.Description = slices.Clone(op.Description)
	case op.Report != nil:
		r := copyReported(*op.Report)
		op.Report = &r
	case op.Liveness != nil:
		l := copyLiveness(*op.Liveness)
		op.Liveness = &l
	case op.Refusals != nil:
		r := copyRefusals(*op.Refusals)
		op.Refusals = &r
	case op.Person != nil:
		p := copyPerson(*op.Person)
		op.Person = &p
	case op.Seat != nil:
		s := copySeat(*op.Seat)
		op.Seat = &s
	case op.Compat != nil:
		c := copyCompat(*op.Compat)
		op.Compat = &c
	case op.Cutover != nil:
		c := copyCutover(*op.Cutover)
		op.Cutover = &c
	}
	return op
}
