package wire

// The AMQP wire: design 19 on the bus the mesh has today, RabbitMQ (design
// 25 §1). The same envelope, the same identities, the same grants as on
// NATS, spelled in exchanges, queues and routing keys.
//
//   - Events go to the topic exchange mesh.events with the routing key
//     <module>.<event key>, the key's dots kept (sensor.alarm.raised).
//   - A module consumes from its durable queue <node>.<module>.events,
//     bound to mesh.events once per pattern its manifest consumes. It is a
//     quorum queue with a delivery limit and the dead-letter exchange
//     mesh.dead: the broker counts deliveries (as JetStream's MaxDeliver
//     does) and moves a message past its limit to the queue mesh.dead.
//   - A tool is served from the queue serve.<module>.<tool>, bound to the
//     exchange mesh.rpc with its own name as routing key and shared by
//     every runtime serving the tool, so they compete for a call. The
//     caller's reply comes through RabbitMQ's direct reply-to.
//   - The mesh declares every exchange, queue and binding (the definitions
//     the broker loads at boot, package amqpdefs); a module declares
//     nothing and only passively checks what it uses (design 19: an
//     implementation creates nothing on the bus).
//
// mesh.rpc is a topic exchange although every binding on it is an exact
// name, so that it routes exactly as a direct exchange would: RabbitMQ
// authorises routing keys (topic permissions) on topic exchanges only, and
// that is what scopes a module's calls to the tools its manifest uses.

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The virtual host, exchanges and queues the mesh declares.
const (
	// AMQPVhost is the virtual host every principal of the mesh uses; a
	// credential's URL names it as its path (amqps://user:pw@host:5671/mesh).
	AMQPVhost = "mesh"
	// ExchangeEvents is the topic exchange events are published to.
	ExchangeEvents = "mesh.events"
	// ExchangeRPC is the exchange tool calls are published to (a topic
	// exchange with exact bindings: see the top of this file).
	ExchangeRPC = "mesh.rpc"
	// ExchangeDead is the fanout exchange a module's events queue
	// dead-letters to.
	ExchangeDead = "mesh.dead"
	// QueueDead keeps the dead letters, each with its x-death header
	// saying why (delivery_limit, rejected) and from which queue.
	QueueDead = "mesh.dead"
	// ExchangeDefault is the name permissions give the default exchange
	// (""), through which a tool's answer is published to the caller's
	// direct reply-to address.
	ExchangeDefault = "amq.default"
	// QueueStatus is the controller's own queue of the provisioner events
	// its status is folded from (StatusConsumer on NATS): bound to
	// ExchangeEvents with StatusRoutingKeys, read by ControllerMeshUser
	// alone. No module's events queue has this name: theirs end in
	// ".events".
	QueueStatus = "controller.status"
	// DirectReplyTo is the pseudo-queue a caller consumes (with no ack)
	// and names as reply-to: RabbitMQ routes the answer to the caller's
	// channel without any queue being declared, which a scoped account
	// could not do (issue 049).
	DirectReplyTo = "amq.rabbitmq.reply-to"
)

// Exchange types.
const (
	ExchangeTopic  = "topic"
	ExchangeFanout = "fanout"
)

// Queue arguments the mesh declares queues with.
const (
	// ArgQueueType selects the queue type.
	ArgQueueType = "x-queue-type"
	// QueueQuorum is the queue type of a module's events queue: the one
	// type whose broker counts deliveries.
	QueueQuorum = "quorum"
	// QueueClassic is the type of the service and dead-letter queues.
	QueueClassic = "classic"
	// ArgDeliveryLimit is a quorum queue's delivery limit (DeliveryLimit).
	ArgDeliveryLimit = "x-delivery-limit"
	// ArgDeadLetterExchange names the exchange a queue dead-letters to.
	ArgDeadLetterExchange = "x-dead-letter-exchange"
	// ArgMessageTTL bounds how long a queue keeps a message, in ms.
	ArgMessageTTL = "x-message-ttl"
	// ArgSingleActiveConsumer has the queue deliver to one consumer at a
	// time, the others standing by: a second controller started beside
	// the first does not fold the status in another order.
	ArgSingleActiveConsumer = "x-single-active-consumer"
	// AMQPDeliveryCount is the header a quorum queue adds to a message it
	// delivers again: how often it was given back before. It is the
	// broker's, not the emitter's, and is ignored as any unknown header is.
	AMQPDeliveryCount = "x-delivery-count"
)

// AMQP reply codes the bindings branch on. NoRespondersAMQP (312,
// NO_ROUTE) is in envelope.go with its NATS twin.
const (
	// AMQPAccessRefused closes the channel of an operation the user has no
	// permission for: a publish outside its emits or uses, a consume of a
	// queue not its own.
	AMQPAccessRefused = 403
	// AMQPNotFound closes the channel of a passive declare, a consume or a
	// publish naming a queue or exchange that does not exist.
	AMQPNotFound = 404
)

// EventRoutingKey is the routing key of module's event with key on
// mesh.events: the key's dots are kept, so a pattern's wildcards apply
// to its tokens exactly as on NATS.
func EventRoutingKey(module, key string) string { return module + "." + key }

// ErrNotEventRoutingKey means a routing key is not <module>.<key>.
var ErrNotEventRoutingKey = errors.New("not an event routing key")

// EventKeyFromRoutingKey recovers the emitting module and the event key
// from a routing key of mesh.events: the key travels in the routing key
// and is never carried twice.
func EventKeyFromRoutingKey(routingKey string) (module, key string, err error) {
	module, key, ok := strings.Cut(routingKey, ".")
	if !ok || CheckName(module) != nil || CheckKey(key) != nil {
		return "", "", fmt.Errorf("%w: %q", ErrNotEventRoutingKey, routingKey)
	}
	return module, key, nil
}

// EventBindingKey turns a consumed pattern "<module>.<key pattern>" (NATS
// wildcards, as manifests and wire.MatchKey spell them) into the binding
// key of the module's events queue on mesh.events. '*' stays '*' (one
// token). '>' (one or more tokens) becomes "*.#": AMQP's '#' alone matches
// zero or more, so "sensor.alarm.#" would also route an event keyed
// "alarm" that "sensor.alarm.>" does not match; "*.#" is exactly one or
// more, and both buses deliver the same events for the same manifest.
func EventBindingKey(pattern string) string {
	if rest, ok := strings.CutSuffix(pattern, ">"); ok && (rest == "" || strings.HasSuffix(rest, ".")) {
		return rest + "*.#"
	}
	return pattern
}

// EventsQueue is the durable queue module consumes from on node: one per
// module per node, like its NATS consumer <node>_<module>.
func EventsQueue(node, module string) string { return node + "." + module + eventsQueueSuffix }

const eventsQueueSuffix = ".events"

// EventsQueueOwner is the node and module an events queue is named for
// (EventsQueue); false for a queue of no module's. A name holds no dot,
// so the split is the one EventsQueue made.
func EventsQueueOwner(queue string) (node, module string, ok bool) {
	rest, ok := strings.CutSuffix(queue, eventsQueueSuffix)
	if !ok {
		return "", "", false
	}
	node, module, ok = strings.Cut(rest, ".")
	return node, module, ok && CheckName(node) == nil && CheckName(module) == nil
}

// StatusRoutingKeys are the binding keys of QueueStatus on ExchangeEvents:
// ProvisionerStatusEvents as routing keys, any provider's. '*' is one
// token, the provider's name, which holds no dot.
func StatusRoutingKeys() []string {
	return []string{EventRoutingKey("*", EventProvisionerFailing), EventRoutingKey("*", EventProvisionerRecovered)}
}

// A dead letter on AMQP. A module's events queue dead-letters to
// ExchangeDead, which RabbitMQ publishes to with the event's own routing
// key, its headers and body kept, and an x-death header prepended: a list
// of tables, the newest death first, each naming the queue it died in
// (the consumer), why, how often, and when. Only the broker publishes
// to ExchangeDead: no module may write it, and a message put into
// QueueDead by name through the default exchange (which a module serving
// a tool may write) arrives from exchange "", so a delivery of QueueDead
// from any other exchange is not a dead letter, whatever x-death it
// carries.
const (
	// AMQPDeath is the header RabbitMQ gives a dead-lettered message.
	AMQPDeath = "x-death"
	// Fields of one x-death table.
	DeathQueue       = "queue"
	DeathReason      = "reason"
	DeathCount       = "count"
	DeathTime        = "time"
	DeathExchange    = "exchange"
	DeathRoutingKeys = "routing-keys"
	// DeathDeliveryLimit is the reason of a message a quorum queue gave
	// up on at its delivery limit: a dead letter, as JetStream's
	// max-deliveries advisory is one. A module's Term is "rejected", which
	// NATS does not record as a dead letter either.
	DeathDeliveryLimit = "delivery_limit"
)

// ServiceQueue is the queue tool of module is served from, shared by every
// runtime serving it. It is also the call's routing key on mesh.rpc.
func ServiceQueue(module, tool string) string { return "serve." + module + "." + tool }

// AMQPUser is the RabbitMQ user of module on node: the same name as on
// NATS (RabbitMQ allows the dots), so a credential names one principal
// whichever bus it points at.
func AMQPUser(node, module string) string { return ModuleUser(node, module) }

// AMQPPort is the port RabbitMQ serves AMQP over TLS on.
const AMQPPort = 5671

// AMQPBusURL composes the URL an AMQP credential carries: amqps, the
// user and password, and the virtual host as its path. A scoped
// credential is always amqps: it pins a certificate.
func AMQPBusURL(user, password, hostport string) string {
	u := url.URL{Scheme: "amqps", User: url.UserPassword(user, password), Host: hostport, Path: "/" + AMQPVhost}
	return u.String()
}

// AMQPControlURL is AMQPBusURL for a user of the control plane: the
// virtual host AMQPControlVhost as the URL's path.
func AMQPControlURL(user, password, hostport string) string {
	u := url.URL{Scheme: "amqps", User: url.UserPassword(user, password), Host: hostport, Path: "/" + AMQPControlVhost}
	return u.String()
}

// DeliveryLimit is the x-delivery-limit that gives a message maxDeliver
// deliveries in all, as JetStream's MaxDeliver counts them: a quorum queue
// dead-letters a message once it has been returned more times than its
// limit, so the limit counts redeliveries, not deliveries. Verified
// against RabbitMQ 3.10 (the SDK's AMQP dead-letter test).
func DeliveryLimit(maxDeliver int) int { return max(maxDeliver-1, 0) }

// A tool call on AMQP. The caller publishes to mesh.rpc with routing key
// ServiceQueue(module, tool), mandatory, reply-to DirectReplyTo, a fresh
// correlation-id, not persisted (delivery mode 1), and an expiration of
// the time it will still wait, so a call nobody took in time is dropped
// by the broker rather than answered later. The answer is published by
// the server to the default exchange with the reply-to as routing key and
// the call's correlation-id, the reply's headers (x-error for a failure,
// envelope.go) as message headers.
//
// No responders. The mesh declares every service queue, so a call is
// routable whether anyone serves the tool or not, and a queue would keep
// it until it expired: the broker's own no-route return (312) only comes
// for a tool no queue exists for. So a caller first declares the service
// queue passively, which needs no permission and answers with its
// consumer count; with no consumer it publishes the call as a probe, with
// CallExpirationProbe, which the broker drops at once unless a consumer
// takes it at that moment. The probe still goes through the broker's
// checks, so a call the caller may not make is refused (ErrDenied) before
// anyone is told nobody serves it, as on NATS.
const CallExpirationProbe = "0"

// CallExpiration is the expiration property of a call that will be waited
// for d: whole milliseconds, at least 1, since "0" is the probe.
func CallExpiration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}

// HeadersToTable renders an envelope's headers (or a tool reply's) as AMQP
// message headers: the same names, each with its first value as a string.
// The envelope has one value per header. The result converts to
// amqp091.Table.
func HeadersToTable(h map[string][]string) map[string]any {
	if len(h) == 0 {
		return nil
	}
	t := make(map[string]any, len(h))
	for name, v := range h {
		if len(v) > 0 {
			t[name] = v[0]
		}
	}
	return t
}

// HeadersFromTable reads AMQP message headers as an envelope's headers.
// A string (or byte string) header is one value; a number, a boolean or a
// time is written out, as the broker's own x-delivery-count is; a table or
// an array (the broker's x-death) is not an envelope header and is left
// out. contentType is the message's content-type property: AMQP's own
// place for it, read when the headers do not carry content-type, so an
// emitter that set only the property is not refused for its absence.
func HeadersFromTable(t map[string]any, contentType string) map[string][]string {
	h := make(map[string][]string, len(t)+1)
	for name, v := range t {
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		case bool:
			s = strconv.FormatBool(v)
		case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
			s = fmt.Sprint(v)
		case float32:
			s = strconv.FormatFloat(float64(v), 'g', -1, 32)
		case float64:
			s = strconv.FormatFloat(v, 'g', -1, 64)
		case time.Time:
			s = v.UTC().Format(time.RFC3339)
		default:
			continue
		}
		h[name] = []string{s}
	}
	if _, ok := h[HeaderContentType]; !ok && contentType != "" {
		h[HeaderContentType] = []string{contentType}
	}
	return h
}

// CheckDirectReplyTo reports whether replyTo is a direct reply-to address
// as RabbitMQ hands it to a responder (DirectReplyTo, a dot and the
// broker's token for the caller's channel): the one reply a responder on
// the AMQP bus answers.
func CheckDirectReplyTo(replyTo string) error {
	token, ok := strings.CutPrefix(replyTo, DirectReplyTo+".")
	if !ok || token == "" {
		return fmt.Errorf("%w: %q is not %s.<token>", ErrReplySubject, replyTo, DirectReplyTo)
	}
	return nil
}

// The control plane on AMQP (issue 19 items 3 and 4,
// docs/decisions/0009-amqp-control-plane.md). It lives in a virtual host
// of its own, AMQPControlVhost: RabbitMQ names nothing across virtual
// hosts (a queue, an exchange, an alternate or dead-letter exchange of
// one is never reached from another), so a module or person, whose users
// have no permission there, cannot log in to it at all. Its users are the
// controller, each node's host, each source repository, the builder and
// each live enrolment token; every user has grants in one virtual host
// only.
//
//   - Everything sent into the control plane goes to the topic exchange
//     ExchangeControl with the wire subject as routing key
//     (NodeReport(node), SubjectEnrol, SourceChanged(repo) …), so the AMQP
//     plane maps no names. Each principal's topic permission there is its
//     own subjects; nobody but the controller may write amq.default, so
//     nobody else can route by queue name.
//   - Each subject has a queue of its own (ControlQueue): a principal that
//     floods fills its own queue and is refused (x-overflow
//     reject-publish), as CONTROL's DiscardNewPerSubject refuses it on
//     NATS, and one queue per node keeps a node's reports in order.
//   - The controller writes NodeQueue(node) (newest declaration only),
//     QueueBuilds, CredentialsQueue(node) and EnrolQueue(token) (the
//     answers); each is read by its one principal. No answer travels by
//     direct reply-to (CredentialsQueue says why).

// Names of the control plane's virtual host, exchange and queues.
const (
	// AMQPControlVhost is the virtual host of the control plane; a
	// credential of one of its users names it as its URL's path.
	AMQPControlVhost = "control"
	// ExchangeControl is the topic exchange every message into the
	// control plane is published to, its routing key the wire subject.
	ExchangeControl = "mesh.control"
	// QueueBuilds is the builders' work queue (BUILDS on NATS), bound to
	// ExchangeControl with SubjectBuildRequest.
	QueueBuilds = "builds"
	// ExchangeByQueueName is the default exchange as a publish names it
	// (permissions call it ExchangeDefault, amq.default): it routes to the
	// queue its routing key names, in the publisher's virtual host.
	ExchangeByQueueName = ""
)

// Queue arguments of the control plane.
const (
	// ArgMaxLength bounds a queue's ready messages.
	ArgMaxLength = "x-max-length"
	// ArgOverflow says what a full queue does: OverflowRejectPublish
	// refuses the publish (a negative confirm), OverflowDropHead drops the
	// oldest.
	ArgOverflow           = "x-overflow"
	OverflowRejectPublish = "reject-publish"
	OverflowDropHead      = "drop-head"
	// ArgExpires deletes a queue unused for so many ms.
	ArgExpires = "x-expires"
)

// controlPrefix is what a control subject's queue name drops: the queue
// of mesh.control.node-a.report is control.node-a.report.
const controlPrefix = "mesh."

// ErrNotControlSubject means a subject has no queue in the control plane.
var ErrNotControlSubject = errors.New("not a subject of the control plane")

// ControlQueue is the queue of control subject (one of SubjectEnrol,
// SubjectBuilt, SubjectPush, NodeReport, NodeAlive, NodeCredentials,
// SourceChanged): the subject without its leading "mesh.", so each
// subject's queue is its own and reads as it. The subject is also the
// queue's one binding key on ExchangeControl.
func ControlQueue(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, controlPrefix)
	if !ok || !strings.HasPrefix(rest, "control.") || strings.ContainsAny(subject, "*># \t\r\n") {
		return "", fmt.Errorf("%w: %q", ErrNotControlSubject, subject)
	}
	for _, t := range strings.Split(rest, ".") {
		if t == "" {
			return "", fmt.Errorf("%w: %q has an empty token", ErrNotControlSubject, subject)
		}
	}
	return rest, nil
}

// NodeQueue is the queue holding node's newest signed declaration
// (NODES on NATS): bound to ExchangeControl with NodeDeclare(node),
// written by the controller alone, read by the node's host alone.
func NodeQueue(node string) string { return "node." + node }

// CredentialsQueue is the queue the controller answers node's credential
// requests in: written by the controller alone through the default
// exchange, read by the node's host alone. The control plane uses no
// direct reply-to: a reply-to token is an address anyone who writes a
// default exchange can send to from any virtual host (every module that
// serves a tool, RABBITMQ-NOTES.md), and a sealed answer says nothing of
// who sealed it. The controller answers in the queue of the node whose
// request queue it read, whatever reply_to the request named.
func CredentialsQueue(node string) string { return "credentials." + node }

// EnrolQueue is the queue an enrolment's answer for token is put in:
// read by the token's user alone, written by the controller alone
// through the default exchange. It is the AMQP twin of EnrolInbox: the
// request names it in its payload (EnrolRequest.Reply), and the
// controller answers there only if CheckEnrolQueue accepts it.
func EnrolQueue(token string) string { return "enrol." + token }

// CheckEnrolQueue reports whether reply, from an enrolment request's
// payload on the AMQP bus, is the answer queue of the token the request
// claims: the controller writes the default exchange, which reaches every
// queue of the control plane by name, so it answers there and nowhere
// else (a reply naming node.<node>, builds or another token's queue
// would have it write there on the requester's word).
func CheckEnrolQueue(token, reply string) error {
	if CheckName(token) != nil || reply != EnrolQueue(token) {
		return fmt.Errorf("%w: %q is not the answer queue of token %q (%s)", ErrReplySubject, reply, token, EnrolQueue(token))
	}
	return nil
}
