package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Mismatch is one operation where the server's verdict differs from the
// composed grants.
type Mismatch struct {
	User    string
	Op      Op
	Subject string
	// Granted is what the composition says; the server did the opposite.
	Granted bool
}

func (m Mismatch) String() string {
	if m.Granted {
		return fmt.Sprintf("%s: %s %q is granted but the server refused it", m.User, m.Op, m.Subject)
	}
	return fmt.Sprintf("%s: %s %q is not granted but the server accepted it", m.User, m.Op, m.Subject)
}

// Universe is the set of subjects the grant check tries: every grant of
// every principal made concrete, every principal's neighbours' subjects
// (another module's events and tools, another node's declaration), and,
// for subscriptions, the wide patterns nobody may hold.
func Universe(m *meshdesc.Mesh) (pub, sub []string) {
	var all []string
	for _, p := range compose.Principals(m) {
		all = append(all, p.Permissions.Publish...)
		all = append(all, p.Permissions.Subscribe...)
	}
	for _, mod := range m.Modules {
		all = append(all, wire.EventSubject(mod.Name, "undeclared"), wire.ToolSubject(mod.Name, "undeclared"))
	}
	for _, n := range m.Nodes {
		all = append(all, wire.NodeDeclare(n.Name), wire.NodeReport(n.Name), wire.NodeAlive(n.Name))
	}
	for _, s := range all {
		pub = append(pub, Concrete(s))
	}
	sub = append(slices.Clone(pub), ">", wire.AnyInbox, wire.SubjectAll, wire.SubjectModuleEvents)
	slices.Sort(pub)
	slices.Sort(sub)
	return slices.Compact(pub), slices.Compact(sub)
}

// Concrete turns a subject pattern into a subject it matches.
func Concrete(pattern string) string {
	toks := strings.Split(pattern, ".")
	for i, t := range toks {
		switch t {
		case "*":
			toks[i] = "any"
		case ">":
			toks[i] = "any.more"
		}
	}
	return strings.Join(toks, ".")
}

// Granted reports whether the composed permissions let the principal do
// op on subject, which may itself be a wildcard subscription.
func Granted(p compose.Principal, op Op, subject string) bool {
	grants := p.Permissions.Publish
	if op == Subscribe {
		grants = p.Permissions.Subscribe
	}
	for _, g := range grants {
		if covers(g, subject) {
			return true
		}
	}
	return false
}

// covers reports whether every subject pattern matches is matched by
// grant, with the server's token wildcards.
func covers(grant, pattern string) bool {
	g := strings.Split(grant, ".")
	p := strings.Split(pattern, ".")
	for i, tok := range g {
		if tok == ">" {
			return len(p) > i
		}
		if i >= len(p) {
			return false
		}
		switch {
		case tok == "*":
			if p[i] == ">" {
				return false
			}
		case tok != p[i]:
			return false
		}
	}
	return len(g) == len(p)
}

// CheckGrants has the server judge every subject of the universe for the
// connected principal, publish and subscribe, and returns every verdict
// that differs from the composed grants. The number of operations tried is
// returned too, so a report can say how much was checked.
func CheckGrants(ctx context.Context, c *Client, p compose.Principal, pub, sub []string) ([]Mismatch, int, error) {
	var out []Mismatch
	for _, run := range []struct {
		op       Op
		subjects []string
	}{{Publish, pub}, {Subscribe, sub}} {
		refused, err := c.TryAll(ctx, run.op, run.subjects)
		if err != nil {
			return nil, 0, fmt.Errorf("check grants of %s: %w", p.User, err)
		}
		for _, s := range run.subjects {
			granted := Granted(p, run.op, s)
			if granted == refused[s] {
				out = append(out, Mismatch{User: p.User, Op: run.op, Subject: s, Granted: granted})
			}
		}
	}
	return out, len(pub) + len(sub), nil
}
