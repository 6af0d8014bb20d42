package observe

import (
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

// PredecessorSnapshot is everything the predecessor's client could notice
// of the broker it shares with the mesh, read from outside (the witness
// of design 25 §9 step 5: "the predecessor's clients never notice"): its
// user and connections as the broker's management API lists them, the
// broker's own record of its user's connections, its virtual host's
// definitions and every grant on them, and the stand-in's own counts.
type PredecessorSnapshot struct {
	Taken time.Time
	// User is its user as the broker keeps it: name, tags and password
	// hash (a password changed under it would end its next login).
	User string
	// Connections are its user's open connections, one line each: the
	// client-provided name, the peer port, when the broker accepted it.
	Connections []string
	// Opened and Closed count its user's connections in the broker's own
	// record since the broker was raised.
	Opened, Closed int
	// Definitions are its virtual host's exchanges, queues and bindings
	// and every permission or topic permission in it or of its user, one
	// canonical line each, sorted.
	Definitions []string
	// Counts are the stand-in's own.
	Counts report.Counts
}

// Noticed is what the predecessor could have noticed between before and
// after, one line each; nil when it noticed nothing. Its counts must
// have grown (sent, received, calls answered): a client that stopped
// would notice nothing, and prove nothing by it.
func Noticed(before, after PredecessorSnapshot) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if before.User != after.User {
		add("its user changed: %q, now %q", before.User, after.User)
	}
	for _, c := range minus(before.Connections, after.Connections) {
		add("its connection %s is gone", c)
	}
	for _, c := range minus(after.Connections, before.Connections) {
		add("a connection %s of its user appeared", c)
	}
	if d := after.Opened - before.Opened; d != 0 {
		add("the broker opened %d connection(s) of its user", d)
	}
	if d := after.Closed - before.Closed; d != 0 {
		add("the broker closed %d connection(s) of its user", d)
	}
	for _, d := range minus(before.Definitions, after.Definitions) {
		add("its virtual host lost %s", d)
	}
	for _, d := range minus(after.Definitions, before.Definitions) {
		add("its virtual host gained %s", d)
	}

	b, a := before.Counts, after.Counts
	if !a.Started.Equal(b.Started) {
		add("the stand-in restarted (started %s, now %s)", b.Started.Format(time.RFC3339Nano), a.Started.Format(time.RFC3339Nano))
		return out
	}
	for _, c := range []struct {
		what          string
		before, after uint64
	}{
		{"lost", b.Lost, a.Lost},
		{"duplicated", b.Duplicated, a.Duplicated},
		{"calls timed out", b.TimedOut, a.TimedOut},
		{"publishes nacked", b.Nacked, a.Nacked},
		{"publishes returned", b.Returned, a.Returned},
	} {
		if c.after != c.before {
			add("%s went from %d to %d", c.what, c.before, c.after)
		}
	}
	for _, d := range a.Disconnects[min(len(b.Disconnects), len(a.Disconnects)):] {
		add("it was disconnected at %s: %d %s", d.At.Format(time.RFC3339Nano), d.Code, d.Reason)
	}
	if n := len(a.Connections) - len(b.Connections); n != 0 {
		add("it opened %d new connection(s)", n)
	}
	for _, c := range []struct {
		what          string
		before, after uint64
	}{
		{"sent", b.Sent, a.Sent},
		{"received", b.Received, a.Received},
		{"had calls answered", b.Answered, a.Answered},
	} {
		if c.after <= c.before {
			add("it %s nothing in between (%d, then %d): a client that stopped proves nothing", c.what, c.before, c.after)
		}
	}
	return out
}

// minus is what a holds that b does not.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// FirstConnected is c as it was when the stand-in first connected:
// nothing counted yet, its first connection alone. Noticed from it says
// what the predecessor noticed over its whole life.
func FirstConnected(c report.Counts) report.Counts {
	return report.Counts{
		Name: c.Name, User: c.User, Vhost: c.Vhost, Started: c.Started,
		Connections: c.Connections[:min(1, len(c.Connections))],
	}
}
