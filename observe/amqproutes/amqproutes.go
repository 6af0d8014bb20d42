// Package amqproutes tries every route RabbitMQ has into the control
// plane's queues, and into the queues of other principals, with a
// principal's own credential, and says what the broker did: refused with
// which reply code, or took the message. Whether anything landed is read
// from the broker's own queue counts (a passive declare through the
// controller's connection), never from what the client believes.
//
// The routes and what closes each are decided in
// docs/decisions/0009-amqp-control-plane.md. Both the Go test of that
// decision (internal/amqptest, TestAMQPIsolation) and the bed's
// @amqp-isolation scenario call this package, so the two try the same
// routes and read the same evidence.
package amqproutes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Kind is what a principal is, as the feature names it.
type Kind string

// The kinds of principal that hold an AMQP credential, but the controller.
const (
	KindModule  Kind = "module"
	KindPerson  Kind = "person"
	KindHost    Kind = "host"
	KindToken   Kind = "token"
	KindBuilder Kind = "builder"
	KindSource  Kind = "source"
)

// Principal is one holder of a credential and what decision 0009 lets it
// do in the control plane.
type Principal struct {
	Kind Kind
	// User is its broker user; Vhost the one virtual host it is granted.
	User, Vhost string
	// Serves is set for a module that serves a tool: it writes the mesh's
	// default exchange, to answer its callers.
	Serves bool
	// Keys are its routing keys on mesh.control; Queues the control
	// plane's queues it reads.
	Keys, Queues []string
	// StreamKeys are keys of its own whose messages go to a stream, where
	// counts cannot see them (the builder's chunks: ChunkKey).
	StreamKeys []string
}

// ChunkKey is an artifact chunk's key, as the builder alone may write
// one; tried by every other principal, refused.
var ChunkKey = wire.ArtifactChunk(wire.Digest([]byte("no artifact")), 0)

// Principals are every principal of m that holds an AMQP credential but
// the controller's two users, in the order modules, persons, hosts,
// tokens, the builder, sources.
func Principals(m *meshdesc.Mesh) []Principal {
	var out []Principal
	for _, pl := range m.Placements() {
		out = append(out, Principal{Kind: KindModule, User: wire.AMQPUser(pl.Node, pl.Module.Name), Vhost: wire.AMQPVhost, Serves: len(pl.Module.AllTools()) > 0})
	}
	for _, p := range m.Persons {
		out = append(out, Principal{Kind: KindPerson, User: wire.PersonUser(p.Name), Vhost: wire.AMQPVhost})
	}
	for _, n := range m.Nodes {
		out = append(out, Principal{Kind: KindHost, User: wire.HostUser(n.Name), Vhost: wire.AMQPControlVhost,
			Keys:   []string{wire.NodeReport(n.Name), wire.NodeAlive(n.Name), wire.NodeCredentials(n.Name), wire.NodeArtifact(n.Name)},
			Queues: []string{wire.NodeQueue(n.Name), wire.CredentialsQueue(n.Name), wire.ArtifactsQueue(n.Name)}})
	}
	for _, t := range m.Tokens {
		out = append(out, Principal{Kind: KindToken, User: wire.EnrolUser(t.ID), Vhost: wire.AMQPControlVhost,
			Keys: []string{wire.SubjectEnrol}, Queues: []string{wire.EnrolQueue(t.ID)}})
	}
	builder := Principal{Kind: KindBuilder, User: wire.BuilderUser, Vhost: wire.AMQPControlVhost,
		Keys: []string{wire.SubjectBuilt}, Queues: []string{wire.QueueBuilds, wire.QueueFetched}, StreamKeys: []string{ChunkKey}}
	for _, s := range m.Sources {
		builder.Keys = append(builder.Keys, wire.SourceFetch(s.Name))
	}
	out = append(out, builder)
	for _, s := range m.Sources {
		out = append(out, Principal{Kind: KindSource, User: wire.SourceUser(s.Name), Vhost: wire.AMQPControlVhost,
			Keys: []string{wire.SourceChanged(s.Name), wire.SourceFetched(s.Name)}, Queues: []string{wire.SourceFetchQueue(s.Name)}})
	}
	return out
}

// Find is the principal of ps whose user is user.
func Find(ps []Principal, user string) (Principal, bool) {
	i := slices.IndexFunc(ps, func(p Principal) bool { return p.User == user })
	if i < 0 {
		return Principal{}, false
	}
	return ps[i], true
}

// InControl reports whether p is a user of the control plane's virtual
// host.
func (p Principal) InControl() bool { return p.Vhost == wire.AMQPControlVhost }

// Plane is the control plane as the broker has it: its queues, and the
// routing keys a publish on mesh.control is tried with (every key it
// binds, and a few it does not).
type Plane struct {
	Queues, Keys []string
	// Streams are the plane's streams (the artifacts'): append-only, so
	// they cannot be emptied or baited, and a read takes nothing away;
	// the counts cannot show a route into or out of them. Reads tries
	// them like the queues, each refused; a key reaching one is among
	// Keys, refused to all but its principal.
	Streams []string
}

// NewPlane is the plane of the broker's control queues and binding keys,
// with the keys no binding has but a wildcard or a near miss could reach
// (an artifact's chunk among them).
func NewPlane(queues, bindingKeys []string) Plane {
	keys := slices.Clone(bindingKeys)
	keys = append(keys, "#", "mesh.control.*.report", "mesh.control.node-a.report.x", "", ChunkKey)
	var qs, streams []string
	for _, q := range queues {
		if q == wire.QueueArtifacts {
			streams = append(streams, q)
		} else {
			qs = append(qs, q)
		}
	}
	slices.Sort(qs)
	slices.Sort(keys)
	return Plane{Queues: qs, Keys: slices.Compact(keys), Streams: streams}
}

// Outcome is what the broker did with one attempt.
type Outcome struct {
	// Acked: a publish confirmed (routed or not); Nacked: refused by a
	// queue (its bound).
	Acked, Nacked bool
	// Closed is the reply code the broker closed the channel or refused
	// the connection with, 0 if it did neither.
	Closed int
	// Returned is the reply code of a mandatory publish handed back (312
	// NO_ROUTE), 0 if none came.
	Returned int
}

// What decision 0009 expects of the routes.
var (
	// Refused is a publish or an operation refused for want of a
	// permission.
	Refused = Outcome{Closed: amqp.AccessRefused}
	// NotAllowed is a login to a virtual host the user has no grant in.
	NotAllowed = Outcome{Closed: amqp.NotAllowed}
	// ForgedUserID is a publish carrying another user's user-id.
	ForgedUserID = Outcome{Closed: amqp.PreconditionFailed}
	// Unroutable is a mandatory publish confirmed and handed back.
	Unroutable = Outcome{Acked: true, Returned: amqp.NoRoute}
	// Taken is a publish confirmed and routed.
	Taken = Outcome{Acked: true}
	// Allowed is an operation the broker let through.
	Allowed = Outcome{}
)

var codeNames = map[int]string{
	amqp.AccessRefused:      "ACCESS_REFUSED",
	amqp.NotAllowed:         "NOT_ALLOWED",
	amqp.PreconditionFailed: "PRECONDITION_FAILED",
	amqp.NotFound:           "NOT_FOUND",
	amqp.NoRoute:            "NO_ROUTE",
}

func code(c int) string {
	if n, ok := codeNames[c]; ok {
		return fmt.Sprintf("%d %s", c, n)
	}
	return fmt.Sprint(c)
}

// String is the outcome as the feature writes it: "refused 403
// ACCESS_REFUSED", "taken", "taken, returned 312 NO_ROUTE", "nacked",
// "allowed".
func (o Outcome) String() string {
	switch {
	case o.Closed != 0:
		return "refused " + code(o.Closed)
	case o.Acked && o.Returned != 0:
		return "taken, returned " + code(o.Returned)
	case o.Acked:
		return "taken"
	case o.Nacked:
		return "nacked"
	default:
		return "allowed"
	}
}

// The routes, as the feature names them.
const (
	RouteOwnKey         = "its own key on mesh.control"
	RouteLogIn          = "log in to the other virtual host"
	RouteByName         = "a control queue by name on the default exchange"
	RouteByNameServing  = "a control queue by name on the mesh's default exchange, serving a tool"
	RouteByNameFromMesh = "a control queue by name on the mesh's default exchange, serving none"
	RouteOtherKey       = "mesh.control with a key not its own"
	RouteOtherExchange  = "another exchange of the control plane"
	RouteUserID         = "another principal's user-id on its own key"
	RouteDeadLetter     = "a queue dead-lettering into mesh.control"
	RouteAlternate      = "an exchange with mesh.control as its alternate"
	RouteBindFrom       = "mesh.control bound to an exchange"
	RouteBindTo         = "an exchange bound to mesh.control"
	RouteConsume        = "consume a queue not its own"
	RouteGet            = "get from a queue not its own"
	RoutePurge          = "purge a queue not its own"
	RouteDelete         = "delete a queue not its own"
	RouteBindQueue      = "bind a queue not its own to mesh.control"
	RouteBindOwnQueue   = "bind its own queue to mesh.control"
)

// Attempt is one route tried and what the broker did.
type Attempt struct {
	User  string
	Kind  Kind
	Route string
	// Target is the queue, routing key or exchange aimed at.
	Target    string
	Want, Got Outcome
}

// Err is nil when the broker did what decision 0009 expects.
func (a Attempt) Err() error {
	if a.Got == a.Want {
		return nil
	}
	return fmt.Errorf("%s (%s): %s %q: expected %v, got %v", a.User, a.Kind, a.Route, a.Target, a.Want, a.Got)
}

// Failures are the attempts of as whose outcome is not the expected one.
func Failures(as []Attempt) []error {
	var out []error
	for _, a := range as {
		if err := a.Err(); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Dialer connects as user to virtual host vhost with the user's own
// credential.
type Dialer func(ctx context.Context, user, vhost string) (*amqp.Connection, error)

// CredentialDialer dials with the credentials cred hands out, TLS pinned
// to the credential's fingerprint and its host name checked; at addr
// (host:port) when it is set (a port published on this host), else where
// the credential's URL says.
func CredentialDialer(cred func(user string) (wire.Credential, error), addr string) Dialer {
	return func(ctx context.Context, user, vhost string) (*amqp.Connection, error) {
		c, err := cred(user)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, fmt.Errorf("%s's credential: %w", user, err)
		}
		u.Path = "/" + vhost
		if addr != "" {
			u.Host = addr
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// amqp091-go's own dialler: it bounds the connect and the
		// handshake, which a broker frozen after accepting would hold.
		return amqp.DialConfig(u.String(), amqp.Config{TLSClientConfig: link.PinnedTLS(c.Fingerprint, c.Host())})
	}
}

// Publish publishes msg on a channel of its own with confirms on and
// waits for the broker's verdict. The error is a failure to try, not a
// refusal (which is in the outcome).
func Publish(ctx context.Context, conn *amqp.Connection, exchange, key string, mandatory bool, msg amqp.Publishing) (Outcome, error) {
	ch, err := conn.Channel()
	if err != nil {
		return Outcome{}, fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return Outcome{}, fmt.Errorf("confirms: %w", err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	returned := ch.NotifyReturn(make(chan amqp.Return, 1))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) {
			return Outcome{Closed: ae.Code}, nil
		}
		return Outcome{}, fmt.Errorf("publish to %q with key %q: %w", exchange, key, err)
	}
	var o Outcome
	select {
	case <-dc.Done():
	case e := <-closed:
		if e != nil {
			o.Closed = e.Code
		}
		return o, nil
	case <-ctx.Done():
		return Outcome{}, fmt.Errorf("publish to %q with key %q: no verdict from the broker: %w", exchange, key, ctx.Err())
	}
	if dc.Acked() {
		o.Acked = true
	} else {
		// A channel closed under a pending confirm settles it negative:
		// tell a refusal from a queue's nack by the close.
		select {
		case e := <-closed:
			if e != nil {
				return Outcome{Closed: e.Code}, nil
			}
		case <-time.After(time.Second):
		}
		o.Nacked = true
	}
	// A return comes before the confirm of the same publish.
	select {
	case r := <-returned:
		o.Returned = int(r.ReplyCode)
	default:
	}
	return o, nil
}

// Do runs op on a channel of its own and says whether the broker refused
// it (Closed is its reply code) or let it through.
func Do(conn *amqp.Connection, op func(ch *amqp.Channel) error) (Outcome, error) {
	ch, err := conn.Channel()
	if err != nil {
		return Outcome{}, fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	if err := op(ch); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) {
			return Outcome{Closed: ae.Code}, nil
		}
		return Outcome{}, err
	}
	return Allowed, nil
}

// Message is a persistent message with body.
func Message(body string) amqp.Publishing {
	return amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}
}

// tries gathers the attempts of one principal.
type tries struct {
	p   Principal
	out []Attempt
}

func (t *tries) add(route, target string, want, got Outcome) {
	t.out = append(t.out, Attempt{User: t.p.User, Kind: t.p.Kind, Route: route, Target: target, Want: want, Got: got})
}

func (t *tries) publish(ctx context.Context, conn *amqp.Connection, route, exchange, key string, mandatory bool, msg amqp.Publishing, want Outcome) error {
	got, err := Publish(ctx, conn, exchange, key, mandatory, msg)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", t.p.User, route, err)
	}
	target := key
	if exchange != wire.ExchangeByQueueName && exchange != wire.ExchangeControl {
		target = exchange
	}
	t.add(route, target, want, got)
	return nil
}

func (t *tries) do(conn *amqp.Connection, route, target string, want Outcome, op func(ch *amqp.Channel) error) error {
	got, err := Do(conn, op)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", t.p.User, route, target, err)
	}
	t.add(route, target, want, got)
	return nil
}

// OwnKeys publishes once with each of p's own keys on mesh.control, each
// expected taken: the rightful route, landing where counts see it.
func OwnKeys(ctx context.Context, conn *amqp.Connection, p Principal) ([]Attempt, error) {
	t := &tries{p: p}
	for _, k := range slices.Concat(p.Keys, p.StreamKeys) {
		if err := t.publish(ctx, conn, RouteOwnKey, wire.ExchangeControl, k, true, Message("rightful"), Taken); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// LogIn tries to log in as p to the virtual host not its own, expected
// refused 530 NOT_ALLOWED.
func LogIn(ctx context.Context, dial Dialer, p Principal) ([]Attempt, error) {
	t := &tries{p: p}
	other := wire.AMQPControlVhost
	if p.InControl() {
		other = wire.AMQPVhost
	}
	conn, err := dial(ctx, p.User, other)
	var got Outcome
	var ae *amqp.Error
	switch {
	case err == nil:
		conn.Close()
	case errors.As(err, &ae):
		got.Closed = ae.Code
	default:
		return nil, fmt.Errorf("%s: log in to vhost %s: %w", p.User, other, err)
	}
	t.add(RouteLogIn, other, NotAllowed, got)
	return t.out, nil
}

// ByQueueName publishes, mandatory, to each control queue by name on the
// default exchange of p's own virtual host. In the control plane nobody
// but the controller writes it (refused); in the mesh's a module serving a
// tool does, where the control plane's names route nowhere (taken and
// returned to it alone), and anyone else is refused.
func ByQueueName(ctx context.Context, conn *amqp.Connection, p Principal, plane Plane) ([]Attempt, error) {
	t := &tries{p: p}
	route, want := RouteByName, Refused
	if !p.InControl() {
		route = RouteByNameFromMesh
		if p.Serves {
			route, want = RouteByNameServing, Unroutable
		}
	}
	for _, q := range plane.Queues {
		if err := t.publish(ctx, conn, route, wire.ExchangeByQueueName, q, true, Message("by name"), want); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// OtherKeys publishes on mesh.control with every key of the plane not p's
// own, and on every other exchange of the control plane, which no topic
// permission narrows: each refused. Only for a user of the control plane.
func OtherKeys(ctx context.Context, conn *amqp.Connection, p Principal, plane Plane) ([]Attempt, error) {
	t := &tries{p: p}
	for _, k := range plane.Keys {
		if slices.Contains(p.Keys, k) || slices.Contains(p.StreamKeys, k) {
			continue
		}
		if err := t.publish(ctx, conn, RouteOtherKey, wire.ExchangeControl, k, true, Message("not mine"), Refused); err != nil {
			return t.out, err
		}
	}
	for _, ex := range []string{"amq.topic", "amq.direct", "amq.fanout", "amq.headers", "amq.match"} {
		if err := t.publish(ctx, conn, RouteOtherExchange, ex, wire.NodeReport("node-b"), false, Message("other exchange"), Refused); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// UserID publishes on p's first own key claiming to be other: the broker
// refuses a user-id that is not the login (406).
func UserID(ctx context.Context, conn *amqp.Connection, p Principal, other string) ([]Attempt, error) {
	t := &tries{p: p}
	if len(p.Keys) == 0 {
		return nil, nil
	}
	forged := Message("forged")
	forged.UserId = other
	err := t.publish(ctx, conn, RouteUserID, wire.ExchangeControl, p.Keys[0], false, forged, ForgedUserID)
	return t.out, err
}

// Redirects tries to have the broker move a message into mesh.control on
// its own authority: a queue dead-lettering into it, an exchange with it
// as alternate, an exchange-to-exchange binding either way. Each refused,
// in either virtual host.
func Redirects(conn *amqp.Connection, p Principal) ([]Attempt, error) {
	t := &tries{p: p}
	evil := "evil." + p.User
	ops := []struct {
		route string
		op    func(ch *amqp.Channel) error
	}{
		{RouteDeadLetter, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(evil, true, false, false, false, amqp.Table{
				wire.ArgDeadLetterExchange: wire.ExchangeControl, "x-dead-letter-routing-key": wire.NodeReport("node-b"),
			})
			return err
		}},
		{RouteAlternate, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(evil, wire.ExchangeTopic, true, false, false, false, amqp.Table{"alternate-exchange": wire.ExchangeControl})
		}},
		{RouteBindFrom, func(ch *amqp.Channel) error {
			return ch.ExchangeBind(wire.ExchangeControl, "#", "amq.topic", false, nil)
		}},
		{RouteBindTo, func(ch *amqp.Channel) error {
			return ch.ExchangeBind("amq.topic", "#", wire.ExchangeControl, false, nil)
		}},
	}
	for _, o := range ops {
		if err := t.do(conn, o.route, wire.ExchangeControl, Refused, o.op); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// Reads tries to consume, get, purge and delete every control queue not
// p's own and to bind it to mesh.control, and to bind its own: each
// refused. Only for a user of the control plane; to be seen in the
// counts, every queue should hold something first.
func Reads(conn *amqp.Connection, p Principal, plane Plane) ([]Attempt, error) {
	t := &tries{p: p}
	for _, q := range slices.Concat(plane.Queues, plane.Streams) {
		if slices.Contains(p.Queues, q) {
			continue
		}
		ops := []struct {
			route string
			op    func(ch *amqp.Channel) error
		}{
			{RouteConsume, func(ch *amqp.Channel) error {
				_, err := ch.Consume(q, "", false, false, false, false, nil)
				return err
			}},
			{RouteGet, func(ch *amqp.Channel) error {
				_, _, err := ch.Get(q, false)
				return err
			}},
			{RoutePurge, func(ch *amqp.Channel) error {
				_, err := ch.QueuePurge(q, false)
				return err
			}},
			{RouteDelete, func(ch *amqp.Channel) error {
				_, err := ch.QueueDelete(q, false, false, false)
				return err
			}},
			{RouteBindQueue, func(ch *amqp.Channel) error {
				return ch.QueueBind(q, "#", wire.ExchangeControl, false, nil)
			}},
		}
		for _, o := range ops {
			if err := t.do(conn, o.route, q, Refused, o.op); err != nil {
				return t.out, err
			}
		}
	}
	for _, own := range p.Queues {
		if err := t.do(conn, RouteBindOwnQueue, own, Refused, func(ch *amqp.Channel) error {
			return ch.QueueBind(own, "#", wire.ExchangeControl, false, nil)
		}); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// Forbidden tries every route decision 0009 closes as p, on conn (p's
// connection to its own virtual host): a login to the other virtual host,
// the default exchange by queue name, and for a user of the control plane
// every key not its own, another exchange, another's user-id (other), the
// broker's redirections and reading queues not its own; for a user of
// the mesh's, the redirections in its own virtual host.
func Forbidden(ctx context.Context, dial Dialer, conn *amqp.Connection, p Principal, plane Plane, other string) ([]Attempt, error) {
	var out []Attempt
	steps := []func() ([]Attempt, error){
		func() ([]Attempt, error) { return LogIn(ctx, dial, p) },
		func() ([]Attempt, error) { return ByQueueName(ctx, conn, p, plane) },
		func() ([]Attempt, error) { return Redirects(conn, p) },
	}
	if p.InControl() {
		steps = append(steps,
			func() ([]Attempt, error) { return OtherKeys(ctx, conn, p, plane) },
			func() ([]Attempt, error) { return UserID(ctx, conn, p, other) },
			func() ([]Attempt, error) { return Reads(conn, p, plane) },
		)
	}
	for _, s := range steps {
		as, err := s()
		out = append(out, as...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// ErrMissing is a queue the broker no longer has.
var ErrMissing = errors.New("queue missing")

// Missing is the count Counts gives a queue the broker does not have.
const Missing = -1

// Counts reads each queue's ready messages from the broker, a passive
// declare answered by the queue itself, through conn (the controller's):
// Missing for a queue the broker does not have.
func Counts(conn *amqp.Connection, queues []string) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return nil, fmt.Errorf("count %s: open a channel: %w", q, err)
		}
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		var ae *amqp.Error
		switch {
		case err == nil:
			out[q] = st.Messages
			ch.Close()
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			out[q] = Missing
		default:
			ch.Close()
			return nil, fmt.Errorf("count %s: %w", q, err)
		}
	}
	return out, nil
}

// Settle waits until the queues hold exactly want, as the broker counts
// them (a quorum queue's count can trail a confirm by a moment), and
// otherwise, past within, says each difference: "control.push: 1,
// expected 0".
func Settle(ctx context.Context, conn *amqp.Connection, want map[string]int, within time.Duration) error {
	queues := slices.Sorted(maps.Keys(want))
	deadline := time.Now().Add(within)
	for {
		got, err := Counts(conn, queues)
		if err != nil {
			return err
		}
		if maps.Equal(got, want) {
			return nil
		}
		if time.Now().After(deadline) {
			var diff []string
			for _, q := range queues {
				if got[q] != want[q] {
					diff = append(diff, fmt.Sprintf("%s: %s, expected %d", q, count(got[q]), want[q]))
				}
			}
			return fmt.Errorf("the queues do not hold what they should, as the broker counts them:\n%s", strings.Join(diff, "\n"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func count(n int) string {
	if n == Missing {
		return "missing"
	}
	return fmt.Sprint(n)
}

// Each is n for every queue.
func Each(queues []string, n int) map[string]int {
	out := map[string]int{}
	for _, q := range queues {
		out[q] = n
	}
	return out
}

// Purge empties queues through conn (the controller's).
func Purge(conn *amqp.Connection, queues []string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("purge: open a channel: %w", err)
	}
	defer ch.Close()
	for _, q := range queues {
		if _, err := ch.QueuePurge(q, false); err != nil {
			return fmt.Errorf("purge %s: %w", q, err)
		}
	}
	return nil
}

// Bait places one message in every queue by name through conn (the
// controller's, the one user that writes the default exchange), so that
// a read let through shows as a count that fell.
func Bait(ctx context.Context, conn *amqp.Connection, queues []string) error {
	for _, q := range queues {
		o, err := Publish(ctx, conn, wire.ExchangeByQueueName, q, true, Message("bait"))
		if err != nil {
			return fmt.Errorf("bait %s: %w", q, err)
		}
		if o != Taken {
			return fmt.Errorf("bait %s: expected it taken, got %v", q, o)
		}
	}
	return nil
}

// Report is what one principal's tries came to.
type Report struct {
	Principal Principal
	// Attempts are every route tried and the broker's answer to each.
	Attempts []Attempt
	// Rightful is nil when p's own messages were counted where they
	// belong (the counts observe what lands); Landed is nil when, after
	// every forbidden route, the control plane's queues held exactly the
	// controller's bait: nothing placed, nothing read.
	Rightful, Landed error
}

// Errs are the report's failures, each "expected X, got Y".
func (r Report) Errs() []error {
	out := Failures(r.Attempts)
	for _, err := range []error{r.Rightful, r.Landed} {
		if err != nil {
			out = append(out, fmt.Errorf("%s (%s): %w", r.Principal.User, r.Principal.Kind, err))
		}
	}
	return out
}

// Within is how long the counts are given to settle.
const Within = 10 * time.Second

// Check tries every route as p, its connections dialled by dial, and
// reads the plane's queues through ctl (the controller's connection to
// the control plane) before and after: the queues emptied, p's own keys
// landing where they belong and counted; emptied again and baited, one
// message each; every forbidden route (Forbidden, other being the user-id
// p claims); and the counts compared with the bait alone. The queues are
// left empty. The error is a failure to try; what the broker did is in
// the report.
func Check(ctx context.Context, dial Dialer, ctl *amqp.Connection, p Principal, plane Plane, other string) (Report, error) {
	r := Report{Principal: p}
	conn, err := dial(ctx, p.User, p.Vhost)
	if err != nil {
		return r, fmt.Errorf("%s logs in to its own vhost %s: %w", p.User, p.Vhost, err)
	}
	defer conn.Close()
	if err := Purge(ctl, plane.Queues); err != nil {
		return r, err
	}
	own, err := OwnKeys(ctx, conn, p)
	r.Attempts = append(r.Attempts, own...)
	if err != nil {
		return r, err
	}
	want := Each(plane.Queues, 0)
	for _, k := range p.Keys {
		q, err := wire.KeyQueue(k)
		if err != nil {
			return r, err
		}
		want[q]++
	}
	r.Rightful = Settle(ctx, ctl, want, Within)
	if err := Purge(ctl, plane.Queues); err != nil {
		return r, err
	}
	if err := Bait(ctx, ctl, plane.Queues); err != nil {
		return r, err
	}
	baited := Each(plane.Queues, 1)
	if err := Settle(ctx, ctl, baited, Within); err != nil {
		return r, fmt.Errorf("bait the control plane: %w", err)
	}
	forbidden, err := Forbidden(ctx, dial, conn, p, plane, other)
	r.Attempts = append(r.Attempts, forbidden...)
	if err != nil {
		return r, err
	}
	r.Landed = Settle(ctx, ctl, baited, Within)
	return r, Purge(ctl, plane.Queues)
}
