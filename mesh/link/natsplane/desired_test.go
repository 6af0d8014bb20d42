package natsplane

import (
	"slices"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

func TestSubjectSubset(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.*", true},
		{"a.b.c", "a.>", true},
		{"a.*", "a.>", true},
		{"a.>", "a.>", true},
		{"a", "a.>", false},
		{"a.>", "a.*", false},
		{"a.*", "a.b", false},
		{"a.b.c", "a.*", false},
		{"a.*.c", "a.b.*", false}, // they overlap, but neither covers the other
		{"x.b", "a.*", false},
	}
	for _, c := range cases {
		if got := subjectSubset(c.a, c.b); got != c.want {
			t.Errorf("subjectSubset(%q, %q): expected %v, got %v", c.a, c.b, c.want, got)
		}
	}
}

func TestReduceFilters(t *testing.T) {
	cases := []struct{ in, want []string }{
		{[]string{"m.a", "m.b"}, []string{"m.a", "m.b"}},
		{[]string{"m.a", "m.a"}, []string{"m.a"}},
		{[]string{"m.a.x", "m.a.>", "m.b"}, []string{"m.a.>", "m.b"}},
		{[]string{"m.*", "m.a", "m.a.>"}, []string{"m.*", "m.a.>"}},
		{[]string{"m.*.c", "m.b.*"}, []string{"m.*.c", "m.b.*"}},
	}
	for _, c := range cases {
		if got := reduceFilters(c.in); !slices.Equal(got, c.want) {
			t.Errorf("reduceFilters(%v): expected %v, got %v", c.in, c.want, got)
		}
	}
}

func TestDesiredStateFollowsTheDescription(t *testing.T) {
	m := sampleMesh(t)
	d := DesiredState(m, DefaultPolicy())
	var names []string
	for _, s := range d.Streams {
		names = append(names, s.Config.Name)
	}
	if !slices.Equal(names, wire.Streams) {
		t.Fatalf("expected streams in wire.Streams order %v, got %v", wire.Streams, names)
	}
	ev := d.Streams[len(d.Streams)-1]
	var consumers []string
	for _, c := range ev.Consumers {
		consumers = append(consumers, c.Durable)
	}
	// Placements that consume, in description order (sensor and catalog
	// consume nothing and get no consumer), then the controller's own.
	if want := []string{"node-a_watcher", "node-b_logger", wire.StatusConsumer}; !slices.Equal(consumers, want) || !ev.Prune {
		t.Fatalf("EVENTS consumers: expected %v pruned, got %v (prune %v)", want, consumers, ev.Prune)
	}
	status := ev.Consumers[len(ev.Consumers)-1]
	if !slices.Equal(status.FilterSubjects, wire.ProvisionerStatusEvents) || status.MaxAckPending != 1 || status.MaxDeliver != unlimitedDeliveries {
		t.Fatalf("status consumer: want the provisioner status events, one delivery at a time, never given up; got %+v", status)
	}
}
