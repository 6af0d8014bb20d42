package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/wire"
)

// terminatedType is the schema type of the server's MSG_TERMINATED
// advisory (nats-server's JSConsumerDeliveryTerminatedAdvisoryType).
const terminatedType = "io.nats.jetstream.advisory.v1.terminated"

// Termination is the server's advisory that a consumer terminated a
// delivery: its reader refused it for good, with a reason.
type Termination struct {
	Type        string    `json:"type"`
	Time        time.Time `json:"timestamp"`
	Stream      string    `json:"stream"`
	Consumer    string    `json:"consumer"`
	ConsumerSeq uint64    `json:"consumer_seq"`
	StreamSeq   uint64    `json:"stream_seq"`
	Deliveries  uint64    `json:"deliveries"`
	Reason      string    `json:"reason"`
}

// Part is what the reason says was refused (wire.RefusalReason): a
// header's name, "body", "headers", "subject" or "envelope"; false for a
// reason that is not a refusal's.
func (t Termination) Part() (string, bool) { return wire.ParseRefusalReason(t.Reason) }

// Terminations hears the server's MSG_TERMINATED advisories for the
// consumers of EVENTS. The server sends one only while someone listens,
// so a watch hears what was terminated after it began and nothing
// before. The controller's user in the mesh account is the one principal
// granted the subject.
type Terminations struct {
	sub    *nats.Subscription
	notify chan struct{}

	mu    sync.Mutex
	heard []Termination
	bad   []string
}

// WatchTerminations starts listening as c's principal and returns once
// the server has accepted the subscription (ErrRefused if it has not).
func WatchTerminations(ctx context.Context, c *Client) (*Terminations, error) {
	t := &Terminations{notify: make(chan struct{}, 1)}
	sub, err := c.Watch(ctx, wire.TerminatedAdvisories, t.hear)
	if err != nil {
		return nil, fmt.Errorf("watch terminations: %w", err)
	}
	t.sub = sub
	return t, nil
}

func (t *Terminations) hear(m *nats.Msg) {
	var a Termination
	err := json.Unmarshal(m.Data, &a)
	t.mu.Lock()
	if err != nil || a.Type != terminatedType {
		t.bad = append(t.bad, fmt.Sprintf("%s: %q", m.Subject, m.Data))
	} else {
		t.heard = append(t.heard, a)
	}
	t.mu.Unlock()
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// Live reports whether it is still listening: a watch whose connection
// closed (the bus was restarted) hears nothing more.
func (t *Terminations) Live() bool { return t.sub.IsValid() }

// Stop ends the watch.
func (t *Terminations) Stop() error { return t.sub.Unsubscribe() }

// Of returns the advisory that consumer terminated the delivery of
// stream sequence seq, if one was heard.
func (t *Terminations) Of(consumer string, seq uint64) (Termination, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.heard {
		if a.Consumer == consumer && a.StreamSeq == seq && a.Stream == wire.StreamEvents {
			return a, true
		}
	}
	return Termination{}, false
}

// Heard is every advisory heard so far, in order.
func (t *Terminations) Heard() []Termination {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Termination(nil), t.heard...)
}

// Await waits until consumer's termination of stream sequence seq is
// heard, and says what was heard instead when ctx ends first.
func (t *Terminations) Await(ctx context.Context, consumer string, seq uint64) (Termination, error) {
	for {
		if a, ok := t.Of(consumer, seq); ok {
			return a, nil
		}
		select {
		case <-t.notify:
		case <-ctx.Done():
			t.mu.Lock()
			heard, bad := len(t.heard), t.bad
			t.mu.Unlock()
			return Termination{}, fmt.Errorf("no advisory that %s terminated stream sequence %d (heard %d other(s), %d unreadable %v): %w",
				consumer, seq, heard, len(bad), bad, ctx.Err())
		}
	}
}
