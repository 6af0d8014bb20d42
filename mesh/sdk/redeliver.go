package sdk

import "time"

// How long the event of a failing handler waits before it is delivered
// again: the first wait (WithRedelivery), doubled with each delivery up
// to the longest. A
// handler fails because something it needs is away (a store, a service),
// and asking again at once spends every delivery the mesh allows in
// milliseconds (issue 7 measured five in 349 µs), so that a one-second
// outage dead-lettered the event. With the controller's five deliveries,
// the waits are 1, 2, 4 and 8 seconds: an outage of up to fifteen seconds
// is ridden out before the fifth and last delivery. The wait is derived
// from the broker's own count of deliveries, so it survives the module
// restarting, and it never holds up the deliveries behind it.
const (
	// DefaultRedelivery is the first wait.
	DefaultRedelivery = time.Second
	maxRedelivery     = 30 * time.Second
)

// redeliveryDelay is the wait after delivery n of an event failed, first
// being the wait after the first, limit the most deliveries the broker
// makes (0: unknown). The last delivery is given back at once: nothing
// will follow it, and the dead letter should not wait.
func redeliveryDelay(n, limit int, first time.Duration) time.Duration {
	if limit > 0 && n >= limit {
		return 0
	}
	if n < 1 {
		n = 1
	}
	if n > 16 {
		return maxRedelivery
	}
	return min(first<<(n-1), maxRedelivery)
}
