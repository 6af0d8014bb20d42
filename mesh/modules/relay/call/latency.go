package call

import (
	"slices"
	"time"
)

// Latency summarises how long the calls that succeeded took, each
// measured around the SDK's Request, in microseconds. It is all zero when
// none succeeded.
type Latency struct {
	// MedianUS is the 50th percentile.
	MedianUS int64 `json:"median_us"`
	// P99US is the 99th percentile.
	P99US int64 `json:"p99_us"`
	// MaxUS is the longest.
	MaxUS int64 `json:"max_us"`
}

// Summarize is the Latency of samples, each percentile by the
// nearest-rank method: the smallest sample at least p% of the samples
// are no greater than, itself a sample, never an interpolation.
func Summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return Latency{
		MedianUS: nearestRank(s, 50).Microseconds(),
		P99US:    nearestRank(s, 99).Microseconds(),
		MaxUS:    s[len(s)-1].Microseconds(),
	}
}

// nearestRank is the p-th percentile (0 < p <= 100) of sorted, which is
// not empty: the sample of rank ceil(p/100 × n), counted from 1. The rank
// is computed in integers: in floating point, 0.99 × 200 is a hair over
// 198, and its ceiling would be the wrong sample.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	rank := (p*n + 99) / 100
	return sorted[max(rank, 1)-1]
}
