package natsplane

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// Policy holds the numbers of design 25 §3 that the streams and consumers
// are asserted with. They are gathered here, not spelled at the call
// sites, so that a change of retention is one edit and drift detection
// compares against the same values that creation used.
type Policy struct {
	// DeadMaxAge is how long a dead letter is kept.
	DeadMaxAge time.Duration
	// EventsMaxAge is how long an event is kept for a consumer that was down.
	EventsMaxAge time.Duration
	// EventsDuplicates is the window in which a repeated Nats-Msg-Id
	// (x-event-id) is recognised and not stored twice.
	EventsDuplicates time.Duration
	// EventsMaxDeliver is how often a module's delivery is tried before the
	// max-deliveries advisory sends it to DEAD.
	EventsMaxDeliver int
	// EventsAckWait is how long a module has to ack before redelivery.
	EventsAckWait time.Duration
	// BuildsAckWait is how long a build request is a builder's before it
	// is redelivered: a builder at work says so (in progress) well within
	// it, one killed mid-build has its request taken by another after it.
	BuildsAckWait time.Duration
	// Bytes bounds each stream's size and MsgSize each message's, by
	// stream name. Every stream is bounded (the accounts require it: a
	// leaked credential must not fill the disk and stop the bus); what a
	// full stream does is Discard's.
	Bytes   map[string]int64
	MsgSize map[string]int32
	// Discard is what a full stream does, by stream. CONTROL, NODES,
	// BUILDS and EVENTS refuse the new message: its publisher gets an
	// error and nothing already acknowledged is ever dropped for it (a
	// host retries its report, an emitter its event). DEAD drops its
	// oldest: a dead letter is a record of a message that stays in
	// EVENTS, and the newest matter most.
	Discard map[string]jetstream.DiscardPolicy
	// ControlPerSubject is how many messages one subject of CONTROL may
	// hold unhandled; a publish past it is refused (DiscardNewPerSubject).
	// A host's reports and a repository's announcements are on subjects
	// of their own, and enrolments, pushes and build outcomes each on
	// their kind's: a principal that floods fills its own subject, never
	// the stream, and the others' publishes are still taken (issue 18). A
	// host whose report is refused keeps it in its outbox; 256 is an hour
	// of reports every 15 s while the store is away, and 256 of the
	// largest message (MsgSize) a quarter of the stream.
	ControlPerSubject int64
}

// DefaultPolicy is the policy the controller runs with.
func DefaultPolicy() Policy {
	return Policy{
		DeadMaxAge:        30 * 24 * time.Hour,
		EventsMaxAge:      7 * 24 * time.Hour,
		EventsDuplicates:  2 * time.Minute,
		EventsMaxDeliver:  5,
		ControlPerSubject: 256,
		EventsAckWait:     30 * time.Second,
		BuildsAckWait:     10 * time.Second,
		Bytes: map[string]int64{
			wire.StreamControl: 256 << 20,
			wire.StreamNodes:   64 << 20,
			wire.StreamBuilds:  64 << 20,
			// Room for the artifacts of a mesh's modules several builds
			// over; the oldest chunks go first (Discard).
			wire.StreamArtifacts: 512 << 20,
			wire.StreamEvents:    1 << 30,
			wire.StreamDead:      256 << 20,
		},
		Discard: map[string]jetstream.DiscardPolicy{
			wire.StreamControl: jetstream.DiscardNew,
			wire.StreamNodes:   jetstream.DiscardNew,
			wire.StreamBuilds:  jetstream.DiscardNew,
			wire.StreamEvents:  jetstream.DiscardNew,
			wire.StreamDead:    jetstream.DiscardOld,
			// An old artifact is dropped for a new one; installing one whose
			// chunks are gone is refused, naming the chunk.
			wire.StreamArtifacts: jetstream.DiscardOld,
		},
		MsgSize: map[string]int32{
			wire.StreamControl: 256 << 10,
			wire.StreamNodes:   256 << 10,
			wire.StreamBuilds:  256 << 10,
			// A chunk and its headers.
			wire.StreamArtifacts: wire.ArtifactChunkSize + 4<<10,
			wire.StreamEvents:    1 << 20,
			wire.StreamDead:      64 << 10,
		},
	}
}

// unlimitedDeliveries is MaxDeliver's "no limit": CONTROL and BUILDS
// never give a message up (the store-window guarantee naks with a delay
// and nothing is dropped; a builder that died has its work redelivered).
const unlimitedDeliveries = -1
