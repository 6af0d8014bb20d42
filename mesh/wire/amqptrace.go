package wire

import (
	"fmt"
	"strings"
)

// RabbitMQ's firehose, as the beds read the control plane from outside
// (observe.AMQPTrace). The broker keeps no record of what went through a
// queue: once a message is handed to a consumer and settled, nothing of
// it stays, and one handed to a consumer and held unsettled cannot be read
// by anyone else. With tracing on in a virtual host (rabbitmqctl
// trace_on), the broker itself publishes a copy of every publish and every
// delivery of that virtual host to ExchangeTrace, which a queue bound
// there receives. Nothing of the mesh uses it.
const (
	// ExchangeTrace is the firehose's topic exchange, one per virtual
	// host; internal (nobody publishes to it) and not traced itself.
	ExchangeTrace = "amq.rabbitmq.trace"
	// TracePublish and TraceDeliver are the first token of a traced
	// copy's routing key: "publish.<exchange>" for a message as it
	// reached the broker, "deliver.<queue>" for each time a queue handed
	// it to a consumer (or to a basic.get), first or again.
	TracePublish = "publish"
	TraceDeliver = "deliver"
	// Headers of a traced copy; its body is the message's.
	TraceExchangeName = "exchange_name"
	TraceRoutingKeys  = "routing_keys"
	// TraceRoutedQueues are the queues a publish was routed to.
	TraceRoutedQueues = "routed_queues"
	// TraceProperties is the message's properties as a table
	// (message_id, headers …).
	TraceProperties = "properties"
	// TraceRedelivered is 1 on a delivery that is not the message's
	// first, 0 otherwise.
	TraceRedelivered = "redelivered"
	// TraceUser is the user that published, or that was handed the
	// delivery.
	TraceUser = "user"
	// TracePropertyMessageID and TracePropertyHeaders are fields of
	// TraceProperties.
	TracePropertyMessageID = "message_id"
	TracePropertyHeaders   = "headers"
)

// TraceKey is the routing key of the firehose's copy of a publish to
// exchange (kind TracePublish) or of a delivery from queue (TraceDeliver).
func TraceKey(kind, name string) string { return kind + "." + name }

// ParseTraceKey splits a firehose routing key into its kind and the
// exchange or queue it names (which may hold dots).
func ParseTraceKey(key string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(key, ".")
	if !ok || (kind != TracePublish && kind != TraceDeliver) {
		return "", "", fmt.Errorf("%q is not a firehose routing key (%s.<exchange> or %s.<queue>)", key, TracePublish, TraceDeliver)
	}
	return kind, name, nil
}

// AMQPObserverUser is the user a bed's harness adds to the broker to read
// the control plane's firehose (its own queues, bound to ExchangeTrace,
// and nothing else). It is no principal of the mesh: no composition
// grants it, and it carries no AMQPOwnerTag, so amqpadmin never changes
// or deletes it.
const AMQPObserverUser = "observer"

// AMQPObserverQueuePrefix begins the names of the observer's own queues,
// the one thing its grants let it declare.
const AMQPObserverQueuePrefix = "observer."

// ControlQueueSubject is the control subject whose queue is queue
// (ControlQueue's inverse); false for a queue that is no control
// subject's (node.<node>, builds, the answer queues).
func ControlQueueSubject(queue string) (string, bool) {
	subject := controlPrefix + queue
	if q, err := ControlQueue(subject); err != nil || q != queue {
		return "", false
	}
	return subject, true
}
