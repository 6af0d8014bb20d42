// Package sdk is the contract a module is written against: connect,
// publish, subscribe, handle, request, close — and nothing more (ADR 0039,
// design 25 §8). It implements design 19's floor and its events and tools
// capabilities on whichever bus the credential names: the URL's scheme
// chooses the binding (tls:// or nats:// -> NATS; amqp:// or amqps:// ->
// AMQP), so one module binary runs on either bus without a rebuild.
//
// What design 19 says about the envelope is decided here, once, for every
// binding: the five required headers and the two optional ones, the body
// as the JSON body alone, local matching of keys against the module's
// patterns, acknowledging what no handler wanted, deduplicating on
// x-source and x-event-id, naking a failed or panicking handler with a
// growing delay, refusing an envelope wire.ValidateEvent refuses (a
// required header missing, a value over its limit, an x-source that is not
// the module the subject names, a body that is not JSON, a message that is
// no envelope at all), and a tool's failure reaching its caller as a
// *ToolError (docs/events.md). The bindings (mesh/link/natslink and mesh/link/amqplink)
// only move envelopes; package link documents the seam between the two.
//
// The exported surface is recorded in testdata/api.golden and checked by
// a test, so that anything added to it is seen in review.
package sdk
