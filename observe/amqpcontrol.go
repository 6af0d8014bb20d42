package observe

// The control plane on AMQP, read from outside (docs/decisions/0009): the
// twin of what the NATS steps read from CONTROL and NODES. The broker
// keeps less than a stream does, so each reading says where it comes
// from:
//
//   - how much a queue holds: the broker's own counts (rabbitmqctl
//     list_queues), ready and handed out but not settled;
//   - what was published and what was handed to a consumer: the
//     broker's firehose (wire.ExchangeTrace), from the moment tracing is
//     on. A paused controller holds up to its prefetch unsettled, which
//     no basic.get can read; the firehose saw them go;
//   - a node's newest declaration: node.<node> itself, read and given
//     back at once, as the host reads it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe/amqproutes"
)

// AMQPQueuesColumns are the columns of `rabbitmqctl list_queues
// --formatter json` that AMQPQueues reads.
var AMQPQueuesColumns = []string{"name", "messages", "messages_ready", "messages_unacknowledged"}

// AMQPQueue is what a queue holds, as the broker counts it. A quorum
// queue's counts are refreshed on its tick (seconds), a classic queue's
// are asked of the queue: read them with a deadline, not once.
type AMQPQueue struct {
	Name string
	// Messages is every message the queue holds: Ready (waiting for a
	// consumer) and Unacked (handed to one, not yet settled).
	Messages, Ready, Unacked int
}

// AMQPQueues reads the broker's queues of one virtual host, as
// rabbitmqctl lists them with AMQPQueuesColumns, by name. A count the
// broker has not computed yet (a quorum queue before its first tick) is
// read as 0.
func AMQPQueues(body []byte) (map[string]AMQPQueue, error) {
	var list []struct {
		Name     string `json:"name"`
		Messages any    `json:"messages"`
		Ready    any    `json:"messages_ready"`
		Unacked  any    `json:"messages_unacknowledged"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("read the broker's queues: %w", err)
	}
	out := make(map[string]AMQPQueue, len(list))
	for _, q := range list {
		var counts [3]int
		for i, v := range []any{q.Messages, q.Ready, q.Unacked} {
			n, err := brokerCount(v)
			if err != nil {
				return nil, fmt.Errorf("read the broker's queues: queue %s: %w", q.Name, err)
			}
			counts[i] = n
		}
		out[q.Name] = AMQPQueue{Name: q.Name, Messages: counts[0], Ready: counts[1], Unacked: counts[2]}
	}
	return out, nil
}

// brokerCount reads one count of list_queues: a number, or an empty
// string or list (Erlang's ” or []) where the broker has none yet.
func brokerCount(v any) (int, error) {
	switch v := v.(type) {
	case float64:
		return int(v), nil
	case string:
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("count %q is not a number", v)
		}
		return n, nil
	case nil:
		return 0, nil
	case []any:
		if len(v) == 0 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("count %v is not a number", v)
}

// ControlQueueHeld reports whether queue is where the control plane keeps
// what CONTROL captures on NATS (wire.StreamSubjects): a report, an
// enrolment, a build's outcome, a push, a source's change. A heartbeat's
// or a credential request's queue is not, as those subjects are not in
// CONTROL.
func ControlQueueHeld(queue string) bool {
	subject, ok := wire.ControlQueueSubject(queue)
	if !ok {
		return false
	}
	return slices.ContainsFunc(wire.StreamSubjects(wire.StreamControl), func(p string) bool { return wire.MatchKey(p, subject) })
}

// HeldInControl are the queues of qs that hold CONTROL's subjects
// (ControlQueueHeld), with what each holds.
func HeldInControl(qs map[string]AMQPQueue) []AMQPQueue {
	var out []AMQPQueue
	for name, q := range qs {
		if ControlQueueHeld(name) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b AMQPQueue) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// AMQPClient is a connection to the broker as one principal, from
// outside.
type AMQPClient struct {
	*amqp.Connection
}

// DialAMQP connects as cred, at address when it is not empty (a port
// published on this host), over TLS with the broker's certificate pinned
// and the credential's host name checked, to the virtual host its URL
// names. Nothing redials: a connection the broker closes stays closed.
func DialAMQP(ctx context.Context, cred wire.Credential, address string) (*AMQPClient, error) {
	u, err := url.Parse(cred.URL)
	if err != nil {
		return nil, fmt.Errorf("%s's credential: %w", cred.User(), err)
	}
	if address != "" {
		u.Host = address
	}
	timeout := 15 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return nil, ctx.Err()
	}
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		TLSClientConfig: link.PinnedTLS(cred.Fingerprint, cred.Host()),
		Dial:            amqp.DefaultDial(timeout),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to the AMQP broker as %s: %w", cred.User(), err)
	}
	return &AMQPClient{Connection: conn}, nil
}

// AMQPAdmin is the broker's administrator, as far as adding the observer
// goes (harness/rabbitmq's container).
type AMQPAdmin interface {
	AddUser(ctx context.Context, user, password string) error
	SetPermissions(ctx context.Context, vhost, user, configure, write, read string) error
}

// AddAMQPObserver adds the observer (wire.AMQPObserverUser) with password
// and lets it watch the control plane's firehose: in its virtual host
// (wire.AMQPControlVhost) it may declare, bind and read queues of its own
// (wire.AMQPObserverQueuePrefix) and read the firehose's exchange, and
// nothing else; no topic grant, no queue of the mesh's. The
// administrator turns the firehose on and off.
func AddAMQPObserver(ctx context.Context, admin AMQPAdmin, password string) error {
	if err := admin.AddUser(ctx, wire.AMQPObserverUser, password); err != nil {
		return fmt.Errorf("add the firehose's observer: %w", err)
	}
	own := regexp.QuoteMeta(wire.AMQPObserverQueuePrefix) + ".*"
	err := admin.SetPermissions(ctx, wire.AMQPControlVhost, wire.AMQPObserverUser,
		"^"+own+"$", "^"+own+"$", "^("+own+"|"+regexp.QuoteMeta(wire.ExchangeTrace)+")$")
	if err != nil {
		return fmt.Errorf("permit the firehose's observer: %w", err)
	}
	return nil
}

// AMQPObserverCredential is the observer's credential: its password, the
// broker at hostport as its certificate names it, the certificate's
// fingerprint pinned, the control plane's virtual host.
func AMQPObserverCredential(password, hostport, fingerprint string) wire.Credential {
	return wire.Credential{URL: wire.AMQPControlURL(wire.AMQPObserverUser, password, hostport), Fingerprint: fingerprint}
}

// AMQPTraced is one copy the firehose made: a message as it reached the
// broker (Kind wire.TracePublish), or one handing of it to a consumer
// (wire.TraceDeliver).
type AMQPTraced struct {
	Kind string
	// Exchange is what the message was published to; Queue, for a
	// delivery, the queue that handed it over.
	Exchange, Queue string
	RoutingKeys     []string
	// RoutedQueues are the queues a publish reached.
	RoutedQueues []string
	// Redelivered marks a delivery that is not the message's first.
	Redelivered bool
	// User published it, or was handed it.
	User      string
	MessageID string
	Body      []byte
}

// AMQPTrace keeps what the firehose of one virtual host copies to a queue
// of the observer's own, from the moment it was bound: every publish and
// every delivery, in the order the broker sent them.
type AMQPTrace struct {
	conn  *AMQPClient
	queue string

	mu      sync.Mutex
	seen    []AMQPTraced
	misread []error
	done    chan struct{}

	stopOnce sync.Once
	onClose  []func() error
}

// WatchAMQPTrace connects as the observer (cred: its user may declare,
// bind and read queues named wire.AMQPObserverQueuePrefix… and read
// wire.ExchangeTrace in its virtual host), at address when it is not
// empty, declares a queue of its own that goes with the connection, binds
// it to the firehose with every key, and keeps what comes until Close.
// The broker copies to the firehose only while tracing is on in the
// virtual host (rabbitmqctl trace_on), which is the caller's to turn on.
func WatchAMQPTrace(ctx context.Context, cred wire.Credential, address string) (*AMQPTrace, error) {
	conn, err := DialAMQP(ctx, cred, address)
	if err != nil {
		return nil, err
	}
	t := &AMQPTrace{conn: conn, queue: wire.AMQPObserverQueuePrefix + "trace." + wire.NewID(), done: make(chan struct{})}
	deliveries, err := t.bind()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	go t.keep(deliveries)
	return t, nil
}

func (t *AMQPTrace) bind() (<-chan amqp.Delivery, error) {
	ch, err := t.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("watch the firehose: open a channel: %w", err)
	}
	// Exclusive: the queue goes with the observer's connection, and
	// nobody else may read it.
	if _, err := ch.QueueDeclare(t.queue, false, true, true, false, nil); err != nil {
		return nil, fmt.Errorf("watch the firehose: declare %s: %w", t.queue, err)
	}
	if err := ch.QueueBind(t.queue, "#", wire.ExchangeTrace, false, nil); err != nil {
		return nil, fmt.Errorf("watch the firehose: bind %s to %s: %w", t.queue, wire.ExchangeTrace, err)
	}
	deliveries, err := ch.Consume(t.queue, "", true, true, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("watch the firehose: consume %s: %w", t.queue, err)
	}
	return deliveries, nil
}

func (t *AMQPTrace) keep(deliveries <-chan amqp.Delivery) {
	defer close(t.done)
	for d := range deliveries {
		got, err := readTraced(d)
		t.mu.Lock()
		if err != nil {
			t.misread = append(t.misread, err)
		} else {
			t.seen = append(t.seen, got)
		}
		t.mu.Unlock()
	}
}

// readTraced reads one copy of the firehose.
func readTraced(d amqp.Delivery) (AMQPTraced, error) {
	kind, name, err := wire.ParseTraceKey(d.RoutingKey)
	if err != nil {
		return AMQPTraced{}, err
	}
	t := AMQPTraced{Kind: kind, Body: d.Body}
	if kind == wire.TraceDeliver {
		t.Queue = name
	}
	t.Exchange, _ = tableString(d.Headers[wire.TraceExchangeName])
	t.User, _ = tableString(d.Headers[wire.TraceUser])
	t.RoutingKeys = tableStrings(d.Headers[wire.TraceRoutingKeys])
	t.RoutedQueues = tableStrings(d.Headers[wire.TraceRoutedQueues])
	switch r := d.Headers[wire.TraceRedelivered].(type) {
	case int8, int16, int32, int64, int:
		t.Redelivered = fmt.Sprint(r) != "0"
	case bool:
		t.Redelivered = r
	}
	if props, ok := d.Headers[wire.TraceProperties].(amqp.Table); ok {
		t.MessageID, _ = tableString(props[wire.TracePropertyMessageID])
	}
	return t, nil
}

func tableString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}

func tableStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := tableString(e); ok {
			out = append(out, s)
		}
	}
	return out
}

// Seen is every copy kept so far, in the broker's order.
func (t *AMQPTrace) Seen() []AMQPTraced {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.seen)
}

// Misread are the copies that could not be read as the firehose's: none,
// unless the broker changed its format.
func (t *AMQPTrace) Misread() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.misread...)
}

// Mark is where the trace stands now: what Delivered and PublishedInto
// count from when given it.
func (t *AMQPTrace) Mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

// Delivered is how often queue handed a message over (first or again)
// since mark (0: since the trace began).
func (t *AMQPTrace) Delivered(queue string, mark int) int {
	n := 0
	for _, c := range t.since(mark) {
		if c.Kind == wire.TraceDeliver && c.Queue == queue {
			n++
		}
	}
	return n
}

// PublishedInto are the publishes the broker routed to queue since mark
// (0: since the trace began), in the order they reached it.
func (t *AMQPTrace) PublishedInto(queue string, mark int) []AMQPTraced {
	var out []AMQPTraced
	for _, c := range t.since(mark) {
		if c.Kind == wire.TracePublish && slices.Contains(c.RoutedQueues, queue) {
			out = append(out, c)
		}
	}
	return out
}

func (t *AMQPTrace) since(mark int) []AMQPTraced {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.seen[min(max(mark, 0), len(t.seen)):])
}

// Alive reports whether the observer's connection still stands: a trace
// whose connection the broker closed has stopped keeping.
func (t *AMQPTrace) Alive() error {
	select {
	case <-t.done:
		return errors.New("the firehose observer's connection was closed: nothing traced since is kept")
	default:
		return nil
	}
}

// OnClose has Close call f after the observer's connection is closed
// (turning tracing off).
func (t *AMQPTrace) OnClose(f func() error) { t.onClose = append(t.onClose, f) }

// Close ends the watch: the connection, the observer's queue with it,
// then what OnClose added.
func (t *AMQPTrace) Close() error {
	var errs []error
	t.stopOnce.Do(func() {
		if err := t.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, err)
		}
		for _, f := range t.onClose {
			errs = append(errs, f())
		}
	})
	return errors.Join(errs...)
}

// TracedReports are node's reports as they reached the broker and were
// routed to its report queue, since the trace began, in that order.
func TracedReports(t *AMQPTrace, node string) ([]wire.Report, error) {
	subject := wire.NodeReport(node)
	q, err := wire.ControlQueue(subject)
	if err != nil {
		return nil, err
	}
	var out []wire.Report
	for _, c := range t.PublishedInto(q, 0) {
		r, err := wire.ParseReport(subject, c.Body)
		if err != nil {
			return nil, fmt.Errorf("a message routed to %s: %w", q, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// SignedDeclaration is a node's declaration as the bus holds it: the
// body and the signature the controller made, on the node's declare
// subject (its routing key on AMQP).
type SignedDeclaration struct {
	Subject   string
	Body      []byte
	Signature string
}

// Node is the node the declaration is for.
func (d SignedDeclaration) Node() string {
	node, _ := wire.NodeOfDeclare(d.Subject)
	return node
}

// NewestDeclaration reads what node.<node> holds, as c (a user that
// reads it: the controller's, or the node's host's), and gives
// it back at once, as the host does: a classic queue of one keeps it, or
// drops it if a newer one came meanwhile. The host reads the same way,
// so the queue may be read empty while the host holds it for a moment:
// it is read again until ctx ends.
func (c *AMQPClient) NewestDeclaration(ctx context.Context, node string) (SignedDeclaration, error) {
	q := wire.NodeQueue(node)
	ch, err := c.Channel()
	if err != nil {
		return SignedDeclaration{}, fmt.Errorf("read %s: open a channel: %w", q, err)
	}
	defer ch.Close()
	for {
		d, ok, err := ch.Get(q, false)
		if err != nil {
			return SignedDeclaration{}, fmt.Errorf("read %s: %w", q, err)
		}
		if ok {
			sig, _ := tableString(d.Headers[wire.HeaderSignature])
			got := SignedDeclaration{Subject: d.RoutingKey, Body: d.Body, Signature: sig}
			if err := d.Nack(false, true); err != nil {
				return SignedDeclaration{}, fmt.Errorf("give %s back: %w", q, err)
			}
			return got, nil
		}
		select {
		case <-ctx.Done():
			return SignedDeclaration{}, fmt.Errorf("read %s: it held nothing each time it was read: %w", q, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Declare publishes d again as c (the controller: no one else may write
// a declaration's key), as the controller declares: on
// wire.ExchangeControl with the declare subject as routing key, its
// signature as a header, persistent, mandatory, and confirmed.
func (c *AMQPClient) Declare(ctx context.Context, d SignedDeclaration) error {
	msg := amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    wire.NewID(),
		Headers:      amqp.Table{wire.HeaderSignature: d.Signature},
		Body:         d.Body,
	}
	o, err := amqproutes.Publish(ctx, c.Connection, wire.ExchangeControl, d.Subject, true, msg)
	if err != nil {
		return fmt.Errorf("publish the declaration on %s again: %w", d.Subject, err)
	}
	if o != amqproutes.Taken {
		return fmt.Errorf("publish the declaration on %s again: expected it taken, the broker answered %v", d.Subject, o)
	}
	return nil
}
