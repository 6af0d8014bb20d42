package store

import (
	"strings"
	"testing"
	"time"
)

// TestQuiet: a node is quiet only by the word of a controller that has
// listened lately, connected all along for longer than QuietAfter.
func TestQuiet(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	long := now.Add(-time.Hour)
	heard := map[string]time.Time{"fresh": now.Add(-time.Second), "old": now.Add(-time.Minute)}
	for _, c := range []struct {
		name    string
		l       Liveness
		node    string
		quiet   bool
		unknown string
	}{
		{"heard lately", Liveness{At: now, Connected: true, ConnectedSince: long, Heard: heard}, "fresh", false, ""},
		{"not heard for a minute", Liveness{At: now, Connected: true, ConnectedSince: long, Heard: heard}, "old", true, ""},
		{"never heard", Liveness{At: now, Connected: true, ConnectedSince: long, Heard: heard}, "never", true, ""},
		{"the controller disconnected", Liveness{At: now, Connected: false, Heard: heard}, "old", false, "connection was down"},
		{"the controller just reconnected", Liveness{At: now, Connected: true, ConnectedSince: now.Add(-5 * time.Second), Heard: heard}, "old", false, "connected only since"},
		{"the controller not listening", Liveness{At: now.Add(-time.Minute), Connected: true, ConnectedSince: long, Heard: heard}, "old", false, "has not listened since"},
		{"no record", Liveness{}, "old", false, "not listened yet"},
	} {
		quiet, unknown := c.l.Quiet(c.node, now)
		if quiet != c.quiet || (c.unknown == "") != (unknown == "") || !strings.Contains(unknown, c.unknown) {
			t.Errorf("%s: quiet %v (%q), want %v (%q)", c.name, quiet, unknown, c.quiet, c.unknown)
		}
	}
}
