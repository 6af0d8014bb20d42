// Package link is the mesh's bus bindings for everyone who speaks the bus
// — the SDK, the controller, the host, the person's client: dialling the
// bus as a principal (Dial: the certificate's fingerprint pinned and its
// name checked, the credential's user, its own inbox prefix), and the seam
// between the SDK's contract (package sdk) and a module's binding, NATS
// (package natslink) and AMQP (package amqplink).
//
// # For the author of a binding
//
// A binding is a dumb pipe. It moves envelopes — headers and a body — and
// settles deliveries when told to; it never decides anything about an
// event. Everything design 19 says about the envelope lives once, in
// package sdk, and is shared by every binding: envelope validation
// (wire.ValidateEvent: headers, x-source against the subject, a JSON
// body), the Event's shape, local key matching, deduplication on x-source
// and x-event-id, panic recovery, the ack/nak/term decision and how long
// a nak waits, and the tool-error encoding
// (wire.ToolErrorHeaders / wire.ToolFailure). So a binding does not import
// package sdk, and sdk chooses a binding by the credential URL's scheme
// (tls, nats -> NATS; amqp, amqps -> AMQP) and calls its Dialer.
//
// What a binding must do:
//
//   - Dial connects as cfg.Credential (already parsed and scoped to one
//     module on one node; never a bootstrap URL), pinning
//     Credential.Fingerprint and checking the certificate's name
//     (PinnedTLS is reusable on any TLS connection). A pin mismatch is
//     ErrFingerprint. It creates nothing on the bus.
//   - Publish emits one event of the module's own: key is the event key
//     without the module, headers are complete (x-event-id etc.). It uses
//     x-event-id as the message id (NATS: Nats-Msg-Id; AMQP: message-id)
//     and returns only once the broker has taken the message (PubAck,
//     publisher confirm).
//   - Consume binds the module's durable consumer or queue on the first
//     call and starts delivering to cfg.Deliver; later calls only add a
//     pattern ("<module>.<key pattern>"), which NATS ignores (the
//     controller set the filters); on AMQP it consumes the module's events
//     queue, which the mesh declared and bound (`>` maps to `*.#`): the
//     binding binds nothing. A consumer the mesh has not created is
//     ErrNoConsumer naming it.
//     The binding calls cfg.Deliver from one goroutine at a time; it
//     returns once the handlers have run and the delivery is settled, or
//     once it is held, so a slow handler slows fetching. A Delivery is
//     settled only through the methods sdk calls on it, which may come
//     after Deliver returned and from another goroutine: sdk holds what no
//     handler wants while the module may still be subscribing, and
//     settles what it held before it calls Close.
//   - Serve answers calls to one of the module's tools in the tool's queue
//     group (NATS: wire.ToolQueue; AMQP: queue serve.<module>.<tool>),
//     replying with exactly the Message the handler returns.
//   - Request calls another module's tool and returns the reply Message
//     unread (sdk decodes a failure). Nobody serving it is ErrNoResponders,
//     the context ending is ErrTimeout, and a call the bus refused for
//     want of a grant is ErrDenied — as soon as the bus says so, not at
//     the deadline.
//   - When the bus or the network drops the connection, the binding
//     reconnects by itself, with backoff, until Close, and consumes and
//     serves again what it did before; a call made meanwhile waits for the
//     bus within its context. What was in flight when the connection went
//     may fail (a publish unconfirmed, a call unanswered) and is the
//     caller's to retry; a delivery not settled comes again, which the SDK
//     recognises by its x-event-id.
//   - Nak(delay) delays the redelivery by delay without holding up the
//     deliveries behind it (NATS: NakWithDelay, kept by the server; AMQP,
//     which has no delayed requeue: the delivery is kept unsettled for
//     delay and then requeued). A delivery waiting out its delay when the
//     binding closes is given back at once, before the connection closes.
//   - Attempt reads the broker's own delivery count (NATS: the message's
//     metadata; AMQP: the quorum queue's x-delivery-count, plus one).
//   - Close drains: fetching stops, the deliveries already fetched are
//     still passed to cfg.Deliver and settled, tool calls in flight are
//     answered, then the connection closes; each wait bounded by
//     cfg.Timeout. After Close returns, cfg.Deliver is not called again.
//     While the bus is away there is nothing to drain: Close stops and
//     closes at once, without an error.
//
// Header names are matched exactly and are lower-case; an AMQP binding
// converts its message headers (amqp.Table) to map[string][]string with
// one value per string header.
package link

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Sentinel errors a binding wraps, re-exported by package sdk.
var (
	// ErrNoResponders: nobody serves the tool called.
	ErrNoResponders = errors.New("no responders: nobody serves the tool")
	// ErrTimeout: the context ended before the bus answered.
	ErrTimeout = errors.New("timed out")
	// ErrNoConsumer: the module's consumer or queue does not exist.
	ErrNoConsumer = errors.New("no consumer: the mesh has not created this module's consumer")
	// ErrDenied: the bus refused what the account has no grant for.
	ErrDenied = errors.New("refused by the bus: the account has no grant for it")
	// ErrClosed: the connection was closed.
	ErrClosed = errors.New("connection closed")
	// ErrUnsupported: no binding is linked in for the URL's scheme.
	ErrUnsupported = errors.New("no binding for this bus")
)

// Message is an envelope on the wire: headers and the body alone.
type Message struct {
	Header map[string][]string
	Body   []byte
}

// Delivery is one event handed to the SDK by the module's consumer.
type Delivery interface {
	// Key is "<module>.<key>", recovered from the subject or routing key;
	// "" for a subject that is not a module's event subject.
	Key() string
	// Message is the delivered envelope.
	Message() Message
	// Attempt is which delivery of the message this is, counting from 1,
	// as the broker counts them, and the most deliveries it makes before
	// it dead-letters the message; limit is 0 when the binding cannot
	// tell.
	Attempt() (n, limit int)
	// Ack settles the delivery as done.
	Ack() error
	// Nak asks for a redelivery no sooner than delay from now (0: at
	// once); the broker dead-letters after its limit.
	Nak(delay time.Duration) error
	// Term refuses the delivery for good, with the reason.
	Term(reason string) error
}

// ToolFunc answers one call to a served tool. It never panics (sdk
// recovers) and always returns the reply to send.
type ToolFunc func(ctx context.Context, req Message) Message

// Config is what sdk hands a binding's Dialer.
type Config struct {
	// Credential is the module's, validated and scoped.
	Credential wire.Credential
	// Deliver receives the module's events once Consume has been called.
	Deliver func(Delivery)
	// Logger receives the binding's own lines (never nil).
	Logger *slog.Logger
	// Timeout bounds waits the caller gave no context for, such as a
	// drain at Close.
	Timeout time.Duration
	// Context lives until Close; handlers run under it.
	Context context.Context
}

// Dialer connects a binding.
type Dialer func(ctx context.Context, cfg Config) (Transport, error)

// Transport is one module's connection to the bus through one binding.
// Its methods are safe for concurrent use.
type Transport interface {
	Publish(ctx context.Context, key string, msg Message) error
	Consume(ctx context.Context, pattern string) error
	Serve(ctx context.Context, tool string, h ToolFunc) error
	Request(ctx context.Context, module, tool string, body []byte) (Message, error)
	Close() error
}
