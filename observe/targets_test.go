package observe

import (
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestEveryControlStreamIsAimedAt: every stream of the control account
// has a target among ControlTargets that it captures, ARTIFACTS among
// them, so a stream added to wire.Streams is aimed at without a list to
// remember.
func TestEveryControlStreamIsAimedAt(t *testing.T) {
	targets := ControlTargets("node-b")
	if len(ControlStreams) == 0 {
		t.Fatal("no stream in the control account")
	}
	for _, s := range ControlStreams {
		hit := false
		for _, target := range targets {
			for _, p := range wire.StreamSubjects(s) {
				hit = hit || matches(p, target)
			}
		}
		if !hit {
			t.Errorf("stream %s (%v) has no target among %v", s, wire.StreamSubjects(s), targets)
		}
	}
	if !strings.Contains(strings.Join(ControlStreams, ","), wire.StreamArtifacts) {
		t.Errorf("ARTIFACTS is not among the control streams %v", ControlStreams)
	}
}

// matches is NATS subject matching of subject against pattern.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range p {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || (t != "*" && t != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}
