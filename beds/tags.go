package beds

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrBadTags is wrapped when a tag expression is not one godog understands.
var ErrBadTags = errors.New("bad tag expression")

// tagRE is one term of godog's tag expressions: a tag, or ~tag for its absence.
var tagRE = regexp.MustCompile(`^~?@?[^\s@~,&|()!]+$`)

// checkTags refuses what godog v0.16 would misread or panic on: it knows only "," (or),
// "&&" (and) and "~" (not), indexes each term's first byte (an empty term panics), and would
// take cucumber's "not @slow" or "@a or @b" for the name of a tag no scenario has.
func checkTags(expr string) error {
	if expr == "" {
		return nil
	}
	for _, or := range strings.Split(expr, ",") {
		for _, term := range strings.Split(or, "&&") {
			if !tagRE.MatchString(strings.TrimSpace(term)) {
				return fmt.Errorf(`%w %q: term %q; godog knows "@a,@b" (or), "@a && @b" (and), "~@a" (not)`,
					ErrBadTags, expr, strings.TrimSpace(term))
			}
		}
	}
	return nil
}

// TagSharesCluster, on a feature, an outline or a scenario, declares that
// its scenarios share clusters: what a scenario's steps change that a
// reset can put back (messages stored with ids of their own, a consumer's
// deliveries) does not cost the next scenario a raise; the runner resets
// the cluster and checks it reads as raised, or throws it away.
const TagSharesCluster = "@shares-cluster"
