package beds

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnknownBed is wrapped by Lookup when an argument names no bed; the message lists the
// valid ones.
var ErrUnknownBed = errors.New("unknown bed")

// Set is a list of beds in step order.
type Set []Bed

// Lookup selects beds from All; see Set.Lookup.
func Lookup(arg string) (Set, error) { return All().Lookup(arg) }

// Lookup selects beds by name, step number or alias ("genesis", "1"), several separated by
// commas ("1,2"), or "all". The result is in step order without repeats.
func (s Set) Lookup(arg string) (Set, error) {
	if arg == "all" {
		return s, nil
	}
	want := map[string]bool{}
	for _, a := range strings.Split(arg, ",") {
		a = strings.TrimSpace(a)
		if _, ok := s.find(a); !ok {
			return nil, fmt.Errorf("%w %q; choose one of: %s", ErrUnknownBed, a, s.Names())
		}
		want[a] = true
	}
	var out Set
	for _, b := range s {
		for _, k := range b.keys() {
			if want[k] {
				out = append(out, b)
				break
			}
		}
	}
	return out, nil
}

// Names lists the beds as "genesis (1), adoption (2), …, all" for messages.
func (s Set) Names() string {
	var parts []string
	for _, b := range s {
		parts = append(parts, fmt.Sprintf("%s (%d)", b.Name, b.Step))
	}
	return strings.Join(append(parts, "all"), ", ")
}

func (s Set) find(key string) (Bed, bool) {
	for _, b := range s {
		for _, k := range b.keys() {
			if k == key {
				return b, true
			}
		}
	}
	return Bed{}, false
}

// keys are the words Lookup accepts for b.
func (b Bed) keys() []string {
	return append([]string{b.Name, strconv.Itoa(b.Step)}, b.Aliases...)
}
