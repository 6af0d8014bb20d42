package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Event is one event as a handler receives it.
type Event struct {
	// ID is x-event-id, made by the emitter; deliveries are deduplicated on it.
	ID string
	// Source is x-source: the emitting module, always the module whose
	// subject the event arrived on (a delivery claiming another is refused).
	Source string
	// Node is x-node: the machine it was emitted from.
	Node string
	// Key is "<module>.<key>", recovered from where the event arrived.
	Key string
	// CausationID is x-causation-id, empty when the event carried none.
	CausationID string
	// Schema is x-schema, empty when the event carried none.
	Schema string
	// Time is x-time, the emit time.
	Time time.Time
	// Body is the event's JSON body, exactly as emitted.
	Body []byte
}

// EventHandler reacts to an event. An error (or a panic) asks for the
// event again: it is redelivered after a wait that doubles with each
// delivery (1 s, 2 s, 4 s … at most 30 s), until the mesh dead-letters it
// (docs/events.md).
type EventHandler func(ctx context.Context, e Event) error

// ToolHandler answers a call of a tool with its result. An error (or a
// panic) reaches the caller as a *ToolError.
type ToolHandler func(ctx context.Context, args []byte) ([]byte, error)

// headers are an event's envelope headers, the required ones always and
// the optional ones only when set.
func headers(e Event) map[string][]string {
	h := map[string][]string{
		wire.HeaderEventID:     {e.ID},
		wire.HeaderSource:      {e.Source},
		wire.HeaderNode:        {e.Node},
		wire.HeaderTime:        {wire.FormatTime(e.Time)},
		wire.HeaderContentType: {wire.ContentTypeJSON},
	}
	if e.CausationID != "" {
		h[wire.HeaderCausationID] = []string{e.CausationID}
	}
	if e.Schema != "" {
		h[wire.HeaderSchema] = []string{e.Schema}
	}
	return h
}

// decode reads a delivered envelope into an Event, refusing one that
// wire.ValidateEvent refuses: a header missing (a *wire.HeaderError naming
// it), malformed or over its limit, an x-source that is not the module
// the subject names, a body that is not JSON, or a message that is no
// envelope at all (a status message, a PubAck aimed at the subject).
func decode(key string, m link.Message) (Event, error) {
	source, _, ok := strings.Cut(key, ".")
	if !ok {
		return Event{}, fmt.Errorf("%w: no event key (a module's event subject is mesh.mod.<module>.event.<key>; a seat's is refused)", wire.ErrNotEventSubject)
	}
	if err := wire.ValidateEvent(source, m.Header, m.Body); err != nil {
		return Event{}, err
	}
	get := func(name string) string { return wire.HeaderValue(m.Header, name) }
	at, err := wire.ParseTime(get(wire.HeaderTime))
	if err != nil {
		return Event{}, err
	}
	return Event{
		ID:          get(wire.HeaderEventID),
		Source:      get(wire.HeaderSource),
		Node:        get(wire.HeaderNode),
		Key:         key,
		CausationID: get(wire.HeaderCausationID),
		Schema:      get(wire.HeaderSchema),
		Time:        at,
		Body:        m.Body,
	}, nil
}
