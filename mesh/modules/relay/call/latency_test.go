package call

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestSummarizeNone(t *testing.T) {
	if got := Summarize(nil); got != (Latency{}) {
		t.Fatalf("expected zero latency for no calls, got %+v", got)
	}
}

func TestSummarizeOne(t *testing.T) {
	got := Summarize([]time.Duration{1234 * time.Microsecond})
	want := Latency{MedianUS: 1234, P99US: 1234, MaxUS: 1234}
	if got != want {
		t.Fatalf("expected %+v, got %+v", want, got)
	}
}

// TestSummarizeTwoHundred: 1 µs to 200 µs, shuffled. By nearest rank the
// median is the 100th (100 µs) and the 99th percentile the 198th
// (198 µs); a floating-point ceiling of 0.99 × 200 would give the 199th.
func TestSummarizeTwoHundred(t *testing.T) {
	s := make([]time.Duration, 200)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Microsecond
	}
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	in := append([]time.Duration(nil), s...)
	got := Summarize(s)
	want := Latency{MedianUS: 100, P99US: 198, MaxUS: 200}
	if got != want {
		t.Fatalf("expected %+v, got %+v", want, got)
	}
	for i := range s {
		if s[i] != in[i] {
			t.Fatal("expected the samples left in their order, got them sorted")
		}
	}
}

func TestNearestRank(t *testing.T) {
	s := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i + 1)
		}
		return out
	}
	for _, tc := range []struct {
		n, p int
		want time.Duration
	}{
		{1, 50, 1}, {1, 99, 1}, {1, 100, 1},
		{2, 50, 1}, {2, 99, 2},
		{3, 50, 2},
		{4, 50, 2}, {4, 99, 4},
		{10, 99, 10}, {10, 90, 9},
		{100, 50, 50}, {100, 99, 99}, {100, 100, 100},
		{101, 99, 100},
		{200, 50, 100}, {200, 99, 198},
		{1000, 99, 990},
	} {
		if got := nearestRank(s(tc.n), tc.p); got != tc.want {
			t.Errorf("n=%d p=%d: expected rank %d, got %d", tc.n, tc.p, tc.want, got)
		}
	}
}
