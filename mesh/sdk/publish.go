package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
)

// Publish emits an event with key (without the module: "alarm.raised")
// on the module's own subject, with the five required headers and the
// optional ones given, the JSON body alone as payload, and returns its
// x-event-id once the bus has stored it. An event the module's manifest
// does not emit is refused by the bus: ErrDenied.
func (m *Module) Publish(ctx context.Context, key string, body []byte, opts ...PublishOption) (eventID string, err error) {
	if err := m.checkOpen(); err != nil {
		return "", err
	}
	if m.person {
		return "", errPerson("publish " + key)
	}
	if err := wire.CheckKey(key); err != nil {
		return "", fmt.Errorf("publish: %w: %w", ErrInvalid, err)
	}
	if !json.Valid(body) {
		return "", fmt.Errorf("publish %s: %w: the body is not JSON", key, ErrInvalid)
	}
	p := publishConfig{}
	for _, o := range opts {
		o(&p)
	}
	if p.id == "" {
		p.id = newEventID()
	}
	if p.at.IsZero() {
		p.at = time.Now()
	}
	e := Event{ID: p.id, Source: m.name, Node: m.node, CausationID: p.causation, Schema: p.schema, Time: p.at}
	h := headers(e)
	// What every reader would refuse (an id over its limit, one with a
	// space) is refused here, where the emitter hears of it.
	if err := wire.ValidateHeaders(h); err != nil {
		return "", fmt.Errorf("publish %s: %w: %w", key, ErrInvalid, err)
	}
	ctx, cancel := m.bounded(ctx)
	defer cancel()
	if err := m.bus.Publish(ctx, key, link.Message{Header: h, Body: body}); err != nil {
		return "", fmt.Errorf("publish %s: %w", key, err)
	}
	return p.id, nil
}
