package controller

import "time"

// Policy holds the numbers of design 25 §3 that the streams and consumers
// are asserted with. They are gathered here, not spelled at the call
// sites, so that a change of retention is one edit and drift detection
// compares against the same values that creation used.
type Policy struct {
	// DeadMaxAge is how long a dead letter is kept.
	DeadMaxAge time.Duration
	// EventsMaxAge is how long an event is kept for a consumer that was down.
	EventsMaxAge time.Duration
	// EventsMaxBytes bounds the EVENTS stream's size.
	EventsMaxBytes int64
	// EventsDuplicates is the window in which a repeated Nats-Msg-Id
	// (x-event-id) is recognised and not stored twice.
	EventsDuplicates time.Duration
	// EventsMaxDeliver is how often a module's delivery is tried before the
	// max-deliveries advisory sends it to DEAD.
	EventsMaxDeliver int
	// EventsAckWait is how long a module has to ack before redelivery.
	EventsAckWait time.Duration
}

// DefaultPolicy is the policy the controller runs with.
func DefaultPolicy() Policy {
	return Policy{
		DeadMaxAge:       30 * 24 * time.Hour,
		EventsMaxAge:     7 * 24 * time.Hour,
		EventsMaxBytes:   1 << 30,
		EventsDuplicates: 2 * time.Minute,
		EventsMaxDeliver: 5,
		EventsAckWait:    30 * time.Second,
	}
}

// unlimitedDeliveries is MaxDeliver's "no limit": CONTROL and BUILDS
// never give a message up (the store-window guarantee naks with a delay
// and nothing is dropped; a builder that died has its work redelivered).
const unlimitedDeliveries = -1
