package conformance

import (
	"fmt"
	"maps"
	"slices"
)

// The cells of a claims table (CheckTable).
const (
	Claimed    = "claimed"
	NotClaimed = "not claimed"
)

// CheckTable lists every way a table of implementations differs from the
// registry, both ways: each row has an implementation, its language, and
// a cell per capability, Claimed or NotClaimed; every implementation of
// the registry has a row and every row is one of the registry's.
func (r *Registry) CheckTable(rows []map[string]string) []string {
	var problems []string
	listed := map[string]bool{}
	for i, row := range rows {
		name := row["implementation"]
		if listed[name] {
			problems = append(problems, fmt.Sprintf("row %d: %s listed twice", i+1, name))
		}
		listed[name] = true
		impl, ok := r.Implementation(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: not in the registry", name))
			continue
		}
		if impl.Language != row["language"] {
			problems = append(problems, fmt.Sprintf("%s: expected language %s, the registry says %s", name, row["language"], impl.Language))
		}
		for _, c := range Capabilities {
			cell, ok := row[string(c)]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: the table has no column %s", name, c))
				continue
			case cell != Claimed && cell != NotClaimed:
				problems = append(problems, fmt.Sprintf("%s: %s is %q, want %q or %q", name, c, cell, Claimed, NotClaimed))
				continue
			}
			if want := cell == Claimed; impl.ClaimsCapability(c) != want {
				problems = append(problems, fmt.Sprintf("%s: expected %s %s, the registry says claimed=%v", name, c, cell, !want))
			}
		}
	}
	for _, impl := range r.Implementations {
		if !listed[impl.Name] {
			problems = append(problems, fmt.Sprintf("%s: in the registry, not in the table", impl.Name))
		}
	}
	return problems
}

// Checked is what the coverage check reads of one scenario: its tags
// ("@events", …) and the implementation it checks, "" when it checks
// none (its examples have no column naming one).
type Checked struct {
	Tags           []string
	Implementation string
}

// CheckCoverage lists every way scenarios fail to check exactly the
// registry's claims: a claim that no scenario tagged with its capability
// checks, and a scenario checking an implementation for a capability it
// does not claim (or one the registry lacks).
func (r *Registry) CheckCoverage(scenarios []Checked) []string {
	var problems []string
	for _, c := range Capabilities {
		checked := map[string]bool{}
		for _, sc := range scenarios {
			if sc.Implementation != "" && slices.Contains(sc.Tags, "@"+string(c)) {
				checked[sc.Implementation] = true
			}
		}
		claimants := r.Claimants(c)
		for _, name := range claimants {
			if !checked[name] {
				problems = append(problems, fmt.Sprintf("%s claims %s, no scenario tagged @%s checks it", name, c, c))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(checked)) {
			if !slices.Contains(claimants, name) {
				problems = append(problems, fmt.Sprintf("a scenario tagged @%s checks %s, which does not claim it", c, name))
			}
		}
	}
	return problems
}
