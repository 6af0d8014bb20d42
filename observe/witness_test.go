package observe

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

func predecessorAt(sent, received, answered uint64) PredecessorSnapshot {
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	return PredecessorSnapshot{
		User:        "legacy-app tags [] hash abc",
		Connections: []string{"name=predecessor peer_port=40000 connected_at=1"},
		Opened:      1,
		Definitions: []string{"exchange legacy.events topic durable", "queue legacy.readings classic durable"},
		Counts: report.Counts{
			Started: start, Sent: sent, Confirmed: sent, Received: received, Highest: received, Calls: answered, Answered: answered,
			Connections: []report.Connection{{At: start, LocalPort: 40000}},
		},
	}
}

func TestNoticedNothingWhenOnlyTheCountsGrew(t *testing.T) {
	if got := Noticed(predecessorAt(10, 9, 3), predecessorAt(200, 198, 50)); len(got) != 0 {
		t.Errorf("expected nothing noticed, got %q", got)
	}
}

func TestNoticedNamesEachThingAClientWouldSee(t *testing.T) {
	before := predecessorAt(10, 9, 3)
	tests := []struct {
		name   string
		change func(*PredecessorSnapshot)
		want   string
	}{
		{"its password changed", func(s *PredecessorSnapshot) { s.User = "legacy-app tags [] hash xyz" }, "its user changed"},
		{"a new connection", func(s *PredecessorSnapshot) {
			s.Connections = []string{"name=predecessor peer_port=40001 connected_at=2"}
			s.Opened, s.Closed = 2, 1
		}, "its connection name=predecessor peer_port=40000 connected_at=1 is gone"},
		{"the broker closed one", func(s *PredecessorSnapshot) { s.Closed = 1 }, "the broker closed 1 connection(s) of its user"},
		{"a queue of its own deleted", func(s *PredecessorSnapshot) { s.Definitions = s.Definitions[:1] }, "its virtual host lost queue legacy.readings classic durable"},
		{"a grant in its virtual host", func(s *PredecessorSnapshot) {
			s.Definitions = append(slices.Clone(s.Definitions), "permission mod.node-a.sensor in legacy: configure .* write .* read .*")
		}, "its virtual host gained permission mod.node-a.sensor"},
		{"a message lost", func(s *PredecessorSnapshot) { s.Counts.Lost = 1 }, "lost went from 0 to 1"},
		{"a message twice", func(s *PredecessorSnapshot) { s.Counts.Duplicated = 2 }, "duplicated went from 0 to 2"},
		{"a call timed out", func(s *PredecessorSnapshot) { s.Counts.TimedOut = 1 }, "calls timed out went from 0 to 1"},
		{"a publish nacked", func(s *PredecessorSnapshot) { s.Counts.Nacked = 1 }, "publishes nacked went from 0 to 1"},
		{"a disconnect", func(s *PredecessorSnapshot) {
			s.Counts.Disconnects = []report.Disconnect{{Code: 320, Reason: "CONNECTION_FORCED - broker forced connection closure"}}
		}, "it was disconnected at"},
		{"a stand-in that stopped", func(s *PredecessorSnapshot) { s.Counts.Received = 9 }, "it received nothing in between"},
		{"a stand-in restarted", func(s *PredecessorSnapshot) { s.Counts.Started = s.Counts.Started.Add(time.Minute) }, "the stand-in restarted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			after := predecessorAt(200, 198, 50)
			tc.change(&after)
			got := Noticed(before, after)
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("expected a line containing %q, got %q", tc.want, got)
			}
		})
	}
}

func TestNoticedOverAWholeLifeFromTheFirstConnection(t *testing.T) {
	now := predecessorAt(200, 198, 50)
	first := now
	first.Counts = FirstConnected(now.Counts)
	if got := Noticed(first, now); len(got) != 0 {
		t.Errorf("expected nothing noticed over a quiet life, got %q", got)
	}
	now.Counts.Connections = append(now.Counts.Connections, report.Connection{LocalPort: 40001})
	now.Counts.Lost = 3
	got := Noticed(first, now)
	for _, want := range []string{"lost went from 0 to 3", "it opened 1 new connection(s)"} {
		if !slices.Contains(got, want) {
			t.Errorf("expected %q among %q", want, got)
		}
	}
}
