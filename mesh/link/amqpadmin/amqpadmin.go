// Package amqpadmin makes the mesh's users and grants live on a running
// RabbitMQ through the broker's own management API (the
// rabbitmq_management plugin), with an administrator credential that the
// controller alone holds. It is the AMQP twin of rewriting nats.conf and
// reloading the server: an enrolment, a token issued or spent, a person
// issued or revoked changes users and permissions without restarting the
// broker and without disconnecting anyone else.
//
// What RabbitMQ does with each change was measured (RABBITMQ-NOTES.md,
// "Management plugin", and this package's tests): a changed password
// leaves open connections alone; a deleted user's connections are closed
// by the broker within milliseconds, so a revocation is a deletion. A
// narrowed or cleared grant, though, is not seen by a channel that has
// already used it: each channel caches the exchanges and routing keys it
// was allowed, and on RabbitMQ 3.10 a channel that published with a key
// before the change goes on publishing with it after. New channels, and
// keys a channel had not used, are refused. So when a grant of a user who
// stays may have narrowed, Apply closes that user's connections (the
// broker answers 320 CONNECTION_FORCED, and the principal reconnects
// under its new grants); a grant that only widens, and every other
// principal, are left connected.
//
// Ownership: Apply changes and deletes only the users tagged
// wire.AMQPOwnerTag, which amqpdefs writes on every user it derives. The
// administrator, and the users of anyone else on the same broker (a
// predecessor's, in virtual hosts of its own), are never changed, even
// when they hold grants in the mesh's virtual hosts.
package amqpadmin

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"

	"github.com/meshbus/mesh/mesh/amqpdefs"
	"github.com/meshbus/mesh/mesh/wire"
)

// Errors callers branch on.
var (
	// ErrUnavailable is a management API that does not answer: nothing
	// listens, the network drops the call, or the context ran out first.
	ErrUnavailable = errors.New("rabbitmq management API does not answer")
	// ErrRefused is a management API that refuses the administrator: a
	// wrong password, or a user without the administrator tag.
	ErrRefused = errors.New("rabbitmq management API refused the administrator")
	// ErrForeignUser is a desired user that exists on the broker without
	// wire.AMQPOwnerTag: someone else's, which Apply will not take over.
	ErrForeignUser = errors.New("user exists and is not the mesh's")
	// ErrInvalid is a desired state Apply cannot bring about as given.
	ErrInvalid = errors.New("invalid desired definitions")
)

// Admin is a connection to one broker's management API as its
// administrator. Its methods may be called from several goroutines.
type Admin struct {
	endpoint string
	user     string
	client   *rabbithole.Client
	base     http.RoundTripper
}

// Option changes what Dial does.
type Option func(*options)

type options struct {
	tls *tls.Config
}

// WithTLS reaches an https endpoint with cfg (for example a pinned
// certificate, link.PinnedTLS).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// Dial reaches the management API at endpoint (http://host:15672, or
// https with WithTLS) as user, and checks, within ctx, that it answers
// and that user is an administrator. Every later call is bounded by the
// context it is given, never by the one of Dial.
func Dial(ctx context.Context, endpoint, user, password string, opts ...Option) (*Admin, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("dial rabbitmq management: endpoint %q is not an http(s) URL", endpoint)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.tls != nil {
		tr.TLSClientConfig = o.tls
	}
	// rabbit-hole closes every request's connection (req.Close), so the
	// pool holds nothing; the dial is bounded by the call's context.
	tr.DisableKeepAlives = true
	c, err := rabbithole.NewTLSClient(strings.TrimRight(endpoint, "/"), user, password, tr)
	if err != nil {
		return nil, fmt.Errorf("dial rabbitmq management at %s: %w", endpoint, err)
	}
	a := &Admin{endpoint: endpoint, user: user, client: c, base: tr}
	me, err := a.with(ctx).Whoami()
	if err != nil {
		return nil, fmt.Errorf("dial rabbitmq management at %s as %s: %w", endpoint, user, err)
	}
	if !slices.Contains(me.Tags, wire.AMQPAdministratorTag) {
		return nil, fmt.Errorf("dial rabbitmq management at %s: %w: %s has tags %v, not %s",
			endpoint, ErrRefused, user, []string(me.Tags), wire.AMQPAdministratorTag)
	}
	return a, nil
}

// with is the client bounded by ctx. rabbit-hole takes no context, so
// each call gets a shallow copy whose transport puts ctx on its requests.
func (a *Admin) with(ctx context.Context) *rabbithole.Client {
	c := *a.client
	c.SetTransport(ctxTransport{ctx: ctx, base: a.base})
	return &c
}

// ctxTransport puts a context on every request and turns the answers
// callers branch on into this package's sentinels: rabbit-hole reports a
// 401 as a bare string.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(r.WithContext(t.ctx))
	if err != nil {
		if cerr := t.ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, cerr)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		res.Body.Close()
		return nil, fmt.Errorf("%w (%s)", ErrRefused, res.Status)
	}
	return res, nil
}

// Kind is what one change did.
type Kind string

// The kinds of change Apply and Retire make.
const (
	VhostCreated           Kind = "vhost created"
	VhostDeleted           Kind = "vhost deleted"
	ExchangeDeclared       Kind = "exchange declared"
	QueueDeclared          Kind = "queue declared"
	BindingDeclared        Kind = "binding declared"
	UserCreated            Kind = "user created"
	UserUpdated            Kind = "user updated"
	UserDeleted            Kind = "user deleted"
	PermissionSet          Kind = "permission set"
	PermissionCleared      Kind = "permission cleared"
	TopicPermissionSet     Kind = "topic permission set"
	TopicPermissionCleared Kind = "topic permission cleared"
	// ConnectionsClosed: the user's grants may have narrowed, and its
	// channels would go on with what they had used (package comment).
	ConnectionsClosed Kind = "connections closed"
)

// Change is one change made on the broker.
type Change struct {
	Kind Kind
	// User is the user changed or whose grant changed; empty for a
	// virtual host.
	User string
	// Vhost is the grant's virtual host, or the one created.
	Vhost string
	// Exchange is a topic permission's exchange, or the one declared or
	// bound from.
	Exchange string
	// Queue is the queue declared or bound.
	Queue string
	// Key is a binding's routing key.
	Key string
	// Connections is how many connections ConnectionsClosed closed.
	Connections int
}

func (c Change) String() string {
	s := string(c.Kind)
	if c.User != "" {
		s += " " + c.User
	}
	if c.Vhost != "" {
		s += " in " + c.Vhost
	}
	if c.Queue != "" {
		s += " " + c.Queue
	}
	if c.Exchange != "" {
		s += " on " + c.Exchange
	}
	if c.Key != "" {
		s += " key " + c.Key
	}
	if c.Kind == ConnectionsClosed {
		s += fmt.Sprintf(" (%d)", c.Connections)
	}
	return s
}

// Changes are what one Apply did, in the order it did them. None means
// the broker was already as desired.
type Changes []Change

func (cs Changes) String() string {
	if len(cs) == 0 {
		return "no change"
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return strings.Join(out, "; ")
}

// step is one planned change and the call that makes it, which may say
// more of what it did in the change.
type step struct {
	change Change
	do     func(*rabbithole.Client, *Change) error
}

// Apply brings the broker's users, and their permissions and topic
// permissions in the virtual hosts of desired, to desired: it creates
// the virtual hosts that are missing, declares the exchanges, queues and
// bindings of desired the broker lacks, creates and updates the users
// (with their password hashes; no password is sent), sets the grants that
// differ, clears the grants no longer desired, closes the connections of
// the users whose grants may have narrowed (package comment), and deletes
// the mesh's users no longer desired, which closes theirs. It touches no
// user without wire.AMQPOwnerTag, nor the administrator it dialled as,
// and no grant outside desired's virtual hosts.
//
// A desired user that exists without the tag is refused (ErrForeignUser)
// before anything changes. Otherwise Apply stops at the first call that
// fails and returns the changes made before it with the error. A second
// Apply of the same desired state changes nothing and returns no changes;
// so if the first failed after a user's grants changed and before its
// ConnectionsClosed, the caller closes them (CloseConnections), since the
// second finds no difference left to act on.
func (a *Admin) Apply(ctx context.Context, desired amqpdefs.Definitions) (Changes, error) {
	if err := a.validate(desired); err != nil {
		return nil, fmt.Errorf("apply definitions: %w", err)
	}
	steps, err := a.plan(ctx, desired)
	if err != nil {
		return nil, fmt.Errorf("apply definitions: %w", err)
	}
	c := a.with(ctx)
	var done Changes
	for _, s := range steps {
		if err := s.do(c, &s.change); err != nil {
			return done, fmt.Errorf("apply definitions: %s: %w (%d changes made before)", s.change, err, len(done))
		}
		done = append(done, s.change)
	}
	return done, nil
}

// validate refuses what would make Apply touch what the mesh does not own
// or leave a grant without its user.
func (a *Admin) validate(d amqpdefs.Definitions) error {
	vhosts := map[string]bool{}
	for _, v := range d.Vhosts {
		if v.Name == "" {
			return fmt.Errorf("%w: a virtual host without a name", ErrInvalid)
		}
		vhosts[v.Name] = true
	}
	users := map[string]bool{}
	for _, u := range d.Users {
		switch {
		case u.Name == "":
			return fmt.Errorf("%w: a user without a name", ErrInvalid)
		case u.Name == a.user:
			return fmt.Errorf("%w: user %s is the administrator", ErrInvalid, u.Name)
		case users[u.Name]:
			return fmt.Errorf("%w: user %s twice", ErrInvalid, u.Name)
		case u.PasswordHash == "":
			return fmt.Errorf("%w: user %s has no password hash", ErrInvalid, u.Name)
		}
		users[u.Name] = true
	}
	for _, p := range d.Permissions {
		if !users[p.User] || !vhosts[p.Vhost] {
			return fmt.Errorf("%w: permission of %s in %s: no such desired user or virtual host", ErrInvalid, p.User, p.Vhost)
		}
	}
	for _, p := range d.TopicPermissions {
		if !users[p.User] || !vhosts[p.Vhost] || p.Exchange == "" {
			return fmt.Errorf("%w: topic permission of %s in %s on %q: no such desired user, virtual host or exchange", ErrInvalid, p.User, p.Vhost, p.Exchange)
		}
	}
	return nil
}

type grantKey struct{ vhost, user string }

type topicKey struct{ vhost, user, exchange string }

// plan reads the broker and lists the steps that bring it to d, in the
// order that never leaves a grant without its user: virtual hosts, users,
// grants set, grants cleared, connections closed, users deleted (their
// grants go with them).
func (a *Admin) plan(ctx context.Context, d amqpdefs.Definitions) ([]step, error) {
	c := a.with(ctx)
	haveVhosts, err := c.ListVhosts()
	if err != nil {
		return nil, fmt.Errorf("list virtual hosts: %w", err)
	}
	haveUsers, err := c.ListUsers()
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	havePerms, err := c.ListPermissions()
	if err != nil {
		return nil, fmt.Errorf("list permissions: %w", err)
	}
	haveTopics, err := c.ListTopicPermissions()
	if err != nil {
		return nil, fmt.Errorf("list topic permissions: %w", err)
	}

	owned := map[string]rabbithole.UserInfo{}
	foreign := map[string]bool{}
	for _, u := range haveUsers {
		if u.Name != a.user && slices.Contains(u.Tags, wire.AMQPOwnerTag) {
			owned[u.Name] = u
		} else {
			foreign[u.Name] = true
		}
	}
	var clash []string
	for _, u := range d.Users {
		if foreign[u.Name] {
			clash = append(clash, u.Name)
		}
	}
	if len(clash) > 0 {
		return nil, fmt.Errorf("%w: %s (tag it %q to hand it to the mesh)", ErrForeignUser, strings.Join(clash, ", "), wire.AMQPOwnerTag)
	}

	var steps []step
	mine := map[string]bool{}
	for _, v := range d.Vhosts {
		mine[v.Name] = true
		if !slices.ContainsFunc(haveVhosts, func(h rabbithole.VhostInfo) bool { return h.Name == v.Name }) {
			name := v.Name
			steps = append(steps, step{Change{Kind: VhostCreated, Vhost: name}, func(c *rabbithole.Client, _ *Change) error {
				_, err := c.PutVhost(name, rabbithole.VhostSettings{Description: "the mesh's"})
				return err
			}})
		}
	}

	topology, err := declareMissing(c, d, haveVhosts)
	if err != nil {
		return nil, err
	}
	steps = append(steps, topology...)

	desiredUsers := map[string]bool{}
	for _, u := range d.Users {
		desiredUsers[u.Name] = true
		want := rabbithole.UserSettings{
			Name:             u.Name,
			Tags:             tags(u.Tags),
			PasswordHash:     u.PasswordHash,
			HashingAlgorithm: rabbithole.HashingAlgorithm(cmp.Or(u.HashingAlgorithm, amqpdefs.HashingAlgorithm)),
		}
		have, ok := owned[u.Name]
		kind := UserCreated
		if ok {
			if have.PasswordHash == want.PasswordHash && have.HashingAlgorithm == want.HashingAlgorithm &&
				slices.Equal(tags(strings.Join(have.Tags, ",")), want.Tags) {
				continue
			}
			kind = UserUpdated
		}
		steps = append(steps, step{Change{Kind: kind, User: u.Name}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.PutUser(want.Name, want)
			return err
		}})
	}

	// The grants of the mesh's users in the mesh's virtual hosts; the
	// grants of a user about to be deleted go with it.
	narrowed := map[string]bool{}
	ours := func(vhost, user string) bool { return mine[vhost] && owned[user].Name != "" && desiredUsers[user] }
	perms := map[grantKey]rabbithole.PermissionInfo{}
	for _, p := range havePerms {
		if ours(p.Vhost, p.User) {
			perms[grantKey{p.Vhost, p.User}] = p
		}
	}
	topics := map[topicKey]rabbithole.TopicPermissionInfo{}
	for _, p := range haveTopics {
		if ours(p.Vhost, p.User) {
			topics[topicKey{p.Vhost, p.User, p.Exchange}] = p
		}
	}
	for _, p := range d.Permissions {
		k := grantKey{p.Vhost, p.User}
		have, ok := perms[k]
		delete(perms, k)
		if ok && have.Configure == p.Configure && have.Write == p.Write && have.Read == p.Read {
			continue
		}
		if ok && !(widens(have.Configure, p.Configure) && widens(have.Write, p.Write) && widens(have.Read, p.Read)) {
			narrowed[p.User] = true
		}
		want := rabbithole.Permissions{Configure: p.Configure, Write: p.Write, Read: p.Read}
		steps = append(steps, step{Change{Kind: PermissionSet, User: p.User, Vhost: p.Vhost}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.UpdatePermissionsIn(k.vhost, k.user, want)
			return err
		}})
	}
	for _, p := range d.TopicPermissions {
		k := topicKey{p.Vhost, p.User, p.Exchange}
		have, ok := topics[k]
		delete(topics, k)
		if ok && have.Write == p.Write && have.Read == p.Read {
			continue
		}
		if ok && !(widens(have.Write, p.Write) && widens(have.Read, p.Read)) {
			narrowed[p.User] = true
		}
		want := rabbithole.TopicPermissions{Exchange: p.Exchange, Write: p.Write, Read: p.Read}
		steps = append(steps, step{Change{Kind: TopicPermissionSet, User: p.User, Vhost: p.Vhost, Exchange: p.Exchange}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.UpdateTopicPermissionsIn(k.vhost, k.user, want)
			return err
		}})
	}
	for _, k := range sortedKeys(topics, func(k topicKey) string { return k.vhost + "\x00" + k.user + "\x00" + k.exchange }) {
		narrowed[k.user] = true
		steps = append(steps, step{Change{Kind: TopicPermissionCleared, User: k.user, Vhost: k.vhost, Exchange: k.exchange}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.DeleteTopicPermissionsIn(k.vhost, k.user, k.exchange)
			return err
		}})
	}
	for _, k := range sortedKeys(perms, func(k grantKey) string { return k.vhost + "\x00" + k.user }) {
		narrowed[k.user] = true
		steps = append(steps, step{Change{Kind: PermissionCleared, User: k.user, Vhost: k.vhost}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.ClearPermissionsIn(k.vhost, k.user)
			return err
		}})
	}
	// After every grant is in place: a principal that reconnects at once
	// gets the new ones.
	for _, name := range sortedKeys(narrowed, func(n string) string { return n }) {
		steps = append(steps, step{Change{Kind: ConnectionsClosed, User: name}, func(c *rabbithole.Client, ch *Change) error {
			n, err := closeConnections(c, name)
			ch.Connections = n
			return err
		}})
	}
	for _, name := range sortedKeys(owned, func(n string) string { return n }) {
		if desiredUsers[name] {
			continue
		}
		steps = append(steps, step{Change{Kind: UserDeleted, User: name}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.DeleteUser(name)
			return err
		}})
	}
	return steps, nil
}

// declareMissing plans the exchanges, queues and bindings of d that the
// broker lacks: what a composition adds (a token's answer queue, a new
// node's declaration queue, a new consumer's events queue) exists before
// its principal is let in. What exists is left as it is: the controller's
// assertion over AMQP compares it and says where it drifted.
func declareMissing(c *rabbithole.Client, d amqpdefs.Definitions, haveVhosts []rabbithole.VhostInfo) ([]step, error) {
	exchanges, queues, bindings := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, v := range d.Vhosts {
		if !slices.ContainsFunc(haveVhosts, func(h rabbithole.VhostInfo) bool { return h.Name == v.Name }) {
			continue // created by this Apply: nothing in it yet
		}
		xs, err := c.ListExchangesIn(v.Name)
		if err != nil {
			return nil, fmt.Errorf("list exchanges in %s: %w", v.Name, err)
		}
		for _, x := range xs {
			exchanges[v.Name+"\x00"+x.Name] = true
		}
		qs, err := c.ListQueuesIn(v.Name)
		if err != nil {
			return nil, fmt.Errorf("list queues in %s: %w", v.Name, err)
		}
		for _, q := range qs {
			queues[v.Name+"\x00"+q.Name] = true
		}
		bs, err := c.ListBindingsIn(v.Name)
		if err != nil {
			return nil, fmt.Errorf("list bindings in %s: %w", v.Name, err)
		}
		for _, b := range bs {
			bindings[v.Name+"\x00"+b.Source+"\x00"+b.Destination+"\x00"+b.RoutingKey] = true
		}
	}
	var steps []step
	for _, x := range d.Exchanges {
		if exchanges[x.Vhost+"\x00"+x.Name] {
			continue
		}
		want := rabbithole.ExchangeSettings{Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Arguments: x.Arguments}
		steps = append(steps, step{Change{Kind: ExchangeDeclared, Vhost: x.Vhost, Exchange: x.Name}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.DeclareExchange(x.Vhost, x.Name, want)
			return err
		}})
	}
	for _, q := range d.Queues {
		if queues[q.Vhost+"\x00"+q.Name] {
			continue
		}
		want := rabbithole.QueueSettings{Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: maps.Clone(q.Arguments)}
		steps = append(steps, step{Change{Kind: QueueDeclared, Vhost: q.Vhost, Queue: q.Name}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.DeclareQueue(q.Vhost, q.Name, want)
			return err
		}})
	}
	for _, b := range d.Bindings {
		if bindings[b.Vhost+"\x00"+b.Source+"\x00"+b.Destination+"\x00"+b.RoutingKey] {
			continue
		}
		info := rabbithole.BindingInfo{Source: b.Source, Vhost: b.Vhost, Destination: b.Destination, DestinationType: b.DestinationType, RoutingKey: b.RoutingKey, Arguments: b.Arguments}
		steps = append(steps, step{Change{Kind: BindingDeclared, Vhost: b.Vhost, Exchange: b.Source, Queue: b.Destination, Key: b.RoutingKey}, func(c *rabbithole.Client, _ *Change) error {
			_, err := c.DeclareBinding(b.Vhost, info)
			return err
		}})
	}
	return steps, nil
}

// CloseConnections closes every open connection of user, the mesh's or
// not, and says how many; the principal sees 320 CONNECTION_FORCED.
func (a *Admin) CloseConnections(ctx context.Context, user string) (int, error) {
	n, err := closeConnections(a.with(ctx), user)
	if err != nil {
		return n, fmt.Errorf("close the connections of %s: %w", user, err)
	}
	return n, nil
}

// closeConnections closes every connection of user the broker lists now
// (the client sees 320 CONNECTION_FORCED). One already gone is not an
// error: rabbit-hole takes the API's 404 for success.
func closeConnections(c *rabbithole.Client, user string) (int, error) {
	list, err := c.ListConnections()
	if err != nil {
		return 0, fmt.Errorf("list connections: %w", err)
	}
	n := 0
	for _, conn := range list {
		if conn.User != user {
			continue
		}
		if _, err := c.CloseConnection(conn.Name); err != nil {
			return n, fmt.Errorf("close connection %s: %w", conn.Name, err)
		}
		n++
	}
	return n, nil
}

// widens says whether the grant expression to allows everything from
// allows: both are amqpdefs' anchored alternatives "^(a|b)$" (or "^$",
// nothing) and to's alternatives include from's. Anything else may
// narrow.
func widens(from, to string) bool {
	if from == to || from == "^$" {
		return true
	}
	alts := func(e string) ([]string, bool) {
		inner, ok := strings.CutPrefix(e, "^(")
		if !ok {
			return nil, false
		}
		inner, ok = strings.CutSuffix(inner, ")$")
		if !ok || strings.ContainsAny(inner, "()") {
			return nil, false
		}
		return strings.Split(inner, "|"), true
	}
	a, okA := alts(from)
	b, okB := alts(to)
	if !okA || !okB {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// tags is a comma-separated tag list as a sorted set with the owner tag
// in it: every user Apply writes is the mesh's.
func tags(s string) rabbithole.UserTags {
	out := []string{wire.AMQPOwnerTag}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[K comparable, V any](m map[K]V, key func(K) string) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b K) int { return strings.Compare(key(a), key(b)) })
	return out
}

// Endpoint is the management API's URL this Admin calls.
func (a *Admin) Endpoint() string { return a.endpoint }

// ApplyAs dials the management API at endpoint as user and applies
// desired (Dial, then Apply), saying what changed: the controller's
// rollout.AMQPAdmin.
func ApplyAs(ctx context.Context, endpoint, user, password string, desired amqpdefs.Definitions) (string, error) {
	a, err := Dial(ctx, endpoint, user, password)
	if err != nil {
		return "", err
	}
	changes, err := a.Apply(ctx, desired)
	return changes.String(), err
}

// Clients counts the open connections of each of users, and of any user
// connected to one of vhosts: the clients of a compatibility broker
// (design 25 §5), as the broker itself lists them.
func (a *Admin) Clients(ctx context.Context, users, vhosts []string) (map[string]int, error) {
	conns, err := a.with(ctx).ListConnections()
	if err != nil {
		return nil, fmt.Errorf("list the broker's connections: %w", err)
	}
	out := map[string]int{}
	for _, c := range conns {
		if slices.Contains(users, c.User) || slices.Contains(vhosts, c.Vhost) {
			out[c.User]++
		}
	}
	return out, nil
}

// ClientsAs is Clients through the management API at endpoint as user:
// what a controller that holds the administrator's password in its store
// is given (rollout.Options.AMQPClients).
func ClientsAs(ctx context.Context, endpoint, user, password string, users, vhosts []string) (map[string]int, error) {
	a, err := Dial(ctx, endpoint, user, password)
	if err != nil {
		return nil, err
	}
	return a.Clients(ctx, users, vhosts)
}

// Retire removes users and vhosts (their queues, exchanges, bindings and
// grants go with them) from the broker: the mesh's side of a broker it
// has moved off (docs/decisions/0013). Removed with users: every user
// granted in vhosts and nowhere else, but the administrator retiring
// them, which finds the users the mesh made and no longer holds (a spent
// token's, whose secret the store dropped after its grace); a user
// granted in another virtual host as well is someone else's and stays.
// The users go first, then the virtual hosts, so that a retirement
// stopped half-way still finds them by their grants, and what is not
// there already is no error: the same call completes it. It says what it
// removed.
func (a *Admin) Retire(ctx context.Context, vhosts, users []string) (Changes, error) {
	c := a.with(ctx)
	grants, err := c.ListPermissions()
	if err != nil {
		return nil, fmt.Errorf("list the grants: %w", err)
	}
	grantedIn := map[string][]string{}
	for _, g := range grants {
		grantedIn[g.User] = append(grantedIn[g.User], g.Vhost)
	}
	all := slices.Clone(users)
	for u, in := range grantedIn {
		ours := !slices.ContainsFunc(in, func(v string) bool { return !slices.Contains(vhosts, v) })
		if ours && u != a.user && !slices.Contains(all, u) {
			all = append(all, u)
		}
	}
	slices.Sort(all)
	done, err := a.deleteUsers(ctx, all)
	if err != nil {
		return done, err
	}
	for _, v := range vhosts {
		res, err := c.DeleteVhost(v)
		if gone(res, err) {
			continue
		}
		if err != nil {
			return done, fmt.Errorf("remove virtual host %s: %w", v, err)
		}
		done = append(done, Change{Kind: VhostDeleted, Vhost: v})
	}
	return done, nil
}

// deletesAtOnce bounds the users Retire deletes at once: the management
// API answers each in a round trip, and a mesh of hundreds of nodes has
// hundreds of users.
const deletesAtOnce = 8

// deleteUsers deletes users, deletesAtOnce at a time, and says which it
// deleted (in users' order); what is gone already is no error.
func (a *Admin) deleteUsers(ctx context.Context, users []string) (Changes, error) {
	deleted := make([]bool, len(users))
	errs := make([]error, len(users))
	slots := make(chan struct{}, deletesAtOnce)
	var wg sync.WaitGroup
	for i, u := range users {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			res, err := a.with(ctx).DeleteUser(u)
			switch {
			case gone(res, err):
			case err != nil:
				errs[i] = fmt.Errorf("remove user %s: %w", u, err)
			default:
				deleted[i] = true
			}
		})
	}
	wg.Wait()
	var done Changes
	for i, u := range users {
		if deleted[i] {
			done = append(done, Change{Kind: UserDeleted, User: u})
		}
	}
	return done, errors.Join(errs...)
}

// gone says whether the API answered that what was to be removed is not
// there.
func gone(res *http.Response, err error) bool {
	var e rabbithole.ErrorResponse
	if errors.As(err, &e) && e.StatusCode == http.StatusNotFound {
		return true
	}
	return res != nil && res.StatusCode == http.StatusNotFound
}

// RetireAs is Retire through the management API at endpoint as user
// (rollout.Options.AMQPRetire).
func RetireAs(ctx context.Context, endpoint, user, password string, vhosts, users []string) (string, error) {
	a, err := Dial(ctx, endpoint, user, password)
	if err != nil {
		return "", err
	}
	changes, err := a.Retire(ctx, vhosts, users)
	return changes.String(), err
}
