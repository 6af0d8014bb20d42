package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxDeliveriesType is the schema type of the server's MAX_DELIVERIES
// advisory, the one DEAD captures (DeadLetterAdvisories).
const MaxDeliveriesType = "io.nats.jetstream.advisory.v1.max_deliver"

// MaxDeliveries is the server's advisory that a message exhausted a
// consumer's deliveries: a dead letter, as DEAD holds it.
type MaxDeliveries struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries int    `json:"deliveries"`
}

// ErrNotDeadLetter is wrapped when DEAD holds something else.
var ErrNotDeadLetter = errors.New("not a dead letter")

// ParseMaxDeliveries reads an advisory DEAD holds.
func ParseMaxDeliveries(data []byte) (MaxDeliveries, error) {
	var a MaxDeliveries
	if err := json.Unmarshal(data, &a); err != nil {
		return MaxDeliveries{}, fmt.Errorf("%w: %v", ErrNotDeadLetter, err)
	}
	if a.Type != MaxDeliveriesType || a.Stream == "" || a.Consumer == "" || a.StreamSeq == 0 {
		return MaxDeliveries{}, fmt.Errorf("%w: %+v", ErrNotDeadLetter, a)
	}
	return a, nil
}

// ConsumerOwner is the node and module a module's consumer on EVENTS is
// named for (ModuleConsumer); false for a consumer of no module's.
func ConsumerOwner(consumer string) (node, module string, ok bool) {
	node, module, ok = strings.Cut(consumer, "_")
	return node, module, ok && CheckName(node) == nil && CheckName(module) == nil
}
