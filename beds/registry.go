package beds

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// registerAll is the one list of beds. Adding a bed is one line here, and a small file
// beside this one saying what the bed is. Design 25 §10 names five: genesis, adoption,
// conformance, living, cutover.
func registerAll(r *Registry) {
	r.Add(genesis())
	r.Add(adoption())
	r.Add(conformance())
	r.Add(living())
	r.Add(cutover())
}

// Registry collects beds and checks each one as it is added: a bed that is malformed,
// or whose name, alias or step collides with one already added, is refused.
type Registry struct {
	features fs.FS
	beds     []Bed
	taken    map[string]string // name, alias or step number -> the bed holding it
	errs     []error
}

// NewRegistry returns an empty registry. When features is not nil, every feature file a
// bed lists must exist in it.
func NewRegistry(features fs.FS) *Registry {
	return &Registry{features: features, taken: map[string]string{}}
}

// Add registers b, or records why it cannot be; Err reports what went wrong.
func (r *Registry) Add(b Bed) {
	if err := b.check(r.features); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	keys := b.keys()
	for _, k := range keys {
		if other, ok := r.taken[k]; ok {
			r.errs = append(r.errs, fmt.Errorf("%w %s: %q is already bed %s", ErrBadBed, b.Name, k, other))
			return
		}
	}
	for _, k := range keys {
		r.taken[k] = b.Name
	}
	b.Aliases = slices.Clone(b.Aliases)
	b.Features = slices.Clone(b.Features)
	r.beds = append(r.beds, b)
}

// Err reports every bed Add refused, or nil.
func (r *Registry) Err() error { return errors.Join(r.errs...) }

// Beds returns the registered beds in step order.
func (r *Registry) Beds() Set {
	s := slices.Clone(r.beds)
	slices.SortFunc(s, func(a, b Bed) int { return a.Step - b.Step })
	return s
}

// All returns every registered bed in step order. A registration mistake is a
// programming error caught by this package's tests, so it panics.
func All() Set {
	r := NewRegistry(nil)
	registerAll(r)
	if err := r.Err(); err != nil {
		panic(err)
	}
	return r.Beds()
}

// Load returns every registered bed in step order, checking as well that their feature
// files exist in features (e.g. os.DirFS("features")).
func Load(features fs.FS) (Set, error) {
	r := NewRegistry(features)
	registerAll(r)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("load beds: %w", err)
	}
	return r.Beds(), nil
}
