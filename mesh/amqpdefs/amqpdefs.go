// Package amqpdefs derives RabbitMQ's definitions — users, the virtual
// hosts (the mesh's, wire.AMQPVhost, here; the control plane's in
// control.go), permissions, topic permissions, exchanges, queues and
// bindings —
// from the mesh description, in the JSON RabbitMQ's load_definitions reads
// at boot. It is package compose's twin for the AMQP bus (design 25 §1):
// pure and deterministic, every grant derived from the manifests' emits,
// consumes, tools and uses and from nothing else (ADR 0043), and every
// exchange, queue and binding declared here, so that a module declares
// nothing (design 19). The names are mesh/wire's (amqp.go).
//
// A module's user may:
//
//   - configure nothing: it declares no queue, exchange or binding, and
//     direct reply-to needs no declaration;
//   - write mesh.events if it emits, and there only the routing keys of its
//     own emits (a topic permission); write mesh.rpc if it uses a tool, and
//     there only the service queues of the tools it uses; write the default
//     exchange (amq.default) if it serves a tool, because an answer goes
//     to the caller's direct reply-to address through it;
//   - read (consume) its own events queue if it consumes, and the service
//     queues of the tools it serves.
//
// The one grant wider than on NATS is the last write: RabbitMQ checks no
// routing key on the default exchange, so a module that serves a tool
// could publish by name into any queue of the virtual host. NATS scopes
// an answer to the reply subject of a call received (allow_responses);
// RabbitMQ has nothing narrower for direct reply-to.
package amqpdefs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// HashingAlgorithm is the password hashing every user's hash is made with.
const HashingAlgorithm = "rabbit_password_hashing_sha256"

// Defaults of Inputs: the numbers of the controller's DefaultPolicy on
// NATS (EventsMaxDeliver, DeadMaxAge), so both buses give up on an event
// and keep a dead letter alike. A test holds them equal.
const (
	DefaultMaxDeliver = 5
	DefaultDeadMaxAge = 30 * 24 * time.Hour
)

// Inputs are what the definitions need beside the description.
type Inputs struct {
	// Hashes maps every user (Users) to its password hash (HashPassword).
	Hashes map[string]string
	// MaxDeliver is how many deliveries an event gets before it is
	// dead-lettered; DefaultMaxDeliver when 0.
	MaxDeliver int
	// DeadMaxAge is how long mesh.dead keeps a dead letter;
	// DefaultDeadMaxAge when 0.
	DeadMaxAge time.Duration
	// ControlPerSubject is how many messages the queue of one control
	// subject (and builds) holds before it refuses a publish;
	// DefaultControlPerSubject when 0.
	ControlPerSubject int
}

// Definitions is the document load_definitions reads. Only the sections
// the mesh declares are written; RabbitMQ leaves what it does not name
// alone.
type Definitions struct {
	Users            []User            `json:"users"`
	Vhosts           []Vhost           `json:"vhosts"`
	Permissions      []Permission      `json:"permissions"`
	TopicPermissions []TopicPermission `json:"topic_permissions"`
	Exchanges        []Exchange        `json:"exchanges"`
	Queues           []Queue           `json:"queues"`
	Bindings         []Binding         `json:"bindings"`
}

// User is one principal.
type User struct {
	Name             string `json:"name"`
	PasswordHash     string `json:"password_hash"`
	HashingAlgorithm string `json:"hashing_algorithm"`
	// Tags are RabbitMQ's user tags, comma-separated. The mesh gives only
	// wire.AMQPOwnerTag, which marks the user as the mesh's (amqpadmin
	// touches no other) and grants nothing: no management access.
	Tags string `json:"tags"`
}

// Vhost is a virtual host.
type Vhost struct {
	Name string `json:"name"`
}

// Permission is a user's resource permissions on a virtual host: three
// regular expressions over exchange and queue names.
type Permission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// TopicPermission restricts the routing keys a user may publish with
// (write) and bind with (read) on one topic exchange. A user without one
// for an exchange may use every key, so every module has one for each.
type TopicPermission struct {
	User     string `json:"user"`
	Vhost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// Exchange is an exchange the mesh declares.
type Exchange struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// Queue is a queue the mesh declares.
type Queue struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// Binding binds a queue to an exchange with a routing key.
type Binding struct {
	Source          string         `json:"source"`
	Vhost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// Users lists the users of the mesh's virtual host (wire.AMQPVhost), in
// the definitions' order: the controller's user there, each module on
// each node, each person. ControlUsers lists the control plane's; Hashes
// must have one for each of both.
func Users(m *meshdesc.Mesh) []string {
	out := []string{wire.ControllerMeshUser}
	for _, pl := range m.Placements() {
		out = append(out, wire.AMQPUser(pl.Node, pl.Module.Name))
	}
	for _, p := range m.Persons {
		out = append(out, wire.PersonUser(p.Name))
	}
	return out
}

// Render is Build rendered as indented JSON with a final newline: the
// same description and inputs give the same bytes.
func Render(m *meshdesc.Mesh, in Inputs) ([]byte, error) {
	d, err := Build(m, in)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render definitions: %w", err)
	}
	return append(b, '\n'), nil
}

// Build derives the definitions from a valid description.
func Build(m *meshdesc.Mesh, in Inputs) (Definitions, error) {
	if in.MaxDeliver == 0 {
		in.MaxDeliver = DefaultMaxDeliver
	}
	if in.DeadMaxAge == 0 {
		in.DeadMaxAge = DefaultDeadMaxAge
	}
	if in.ControlPerSubject == 0 {
		in.ControlPerSubject = DefaultControlPerSubject
	}
	if in.ControlPerSubject < 1 {
		return Definitions{}, fmt.Errorf("build definitions: control per subject %d is below 1", in.ControlPerSubject)
	}
	if in.MaxDeliver < 1 {
		return Definitions{}, fmt.Errorf("build definitions: max deliver %d is below 1", in.MaxDeliver)
	}
	d := Definitions{Vhosts: []Vhost{{Name: wire.AMQPVhost}, {Name: wire.AMQPControlVhost}}}
	for _, name := range slices.Concat(Users(m), ControlUsers(m)) {
		h, ok := in.Hashes[name]
		if !ok || h == "" {
			return Definitions{}, fmt.Errorf("build definitions: no password hash for user %s", name)
		}
		d.Users = append(d.Users, User{Name: name, PasswordHash: h, HashingAlgorithm: HashingAlgorithm, Tags: wire.AMQPOwnerTag})
	}

	// The controller is the mesh's own principal: it may assert the
	// topology and read the dead letters and its status queue, which no
	// module or person may (their reads are their own queues, by exact
	// name). No topic permission: every key.
	d.Permissions = append(d.Permissions, permission(wire.ControllerMeshUser, ".*", ".*", ".*"))
	for _, pl := range m.Placements() {
		g := moduleGrants(m, pl.Node, pl.Module)
		d.Permissions = append(d.Permissions, g.permission)
		d.TopicPermissions = append(d.TopicPermissions, g.topics...)
	}
	for _, p := range m.Persons {
		g := personGrants(m, p)
		d.Permissions = append(d.Permissions, g.permission)
		d.TopicPermissions = append(d.TopicPermissions, g.topics...)
	}

	d.Exchanges = []Exchange{
		exchange(wire.ExchangeEvents, wire.ExchangeTopic),
		exchange(wire.ExchangeRPC, wire.ExchangeTopic),
		exchange(wire.ExchangeDead, wire.ExchangeFanout),
	}
	d.Queues = append(d.Queues, Queue{
		Name: wire.QueueDead, Vhost: wire.AMQPVhost, Durable: true,
		Arguments: map[string]any{
			wire.ArgQueueType:  wire.QueueClassic,
			wire.ArgMessageTTL: in.DeadMaxAge.Milliseconds(),
		},
	})
	d.Bindings = append(d.Bindings, binding(wire.ExchangeDead, wire.QueueDead, ""))
	// The controller's status queue: what the status consumer is on NATS.
	// The status is a fold in the order the providers spoke, so one
	// consumer at a time takes its events, one at a time, and a delivery
	// held comes back before those behind it: a classic queue puts a
	// requeued message back in its place, where RabbitMQ 3.10's quorum
	// queue puts it last (measured: linktest's status body, run by
	// amqpplane's TestContract, fails on a quorum queue).
	// No delivery limit, no dead-letter exchange, no bound: a failing word
	// lost would be a failure nobody hears of.
	d.Queues = append(d.Queues, Queue{
		Name: wire.QueueStatus, Vhost: wire.AMQPVhost, Durable: true,
		Arguments: map[string]any{
			wire.ArgQueueType:            wire.QueueClassic,
			wire.ArgSingleActiveConsumer: true,
		},
	})
	for _, key := range wire.StatusRoutingKeys() {
		d.Bindings = append(d.Bindings, binding(wire.ExchangeEvents, wire.QueueStatus, key))
	}
	for _, pl := range m.Placements() {
		if len(pl.Module.Consumes) == 0 {
			continue
		}
		q := wire.EventsQueue(pl.Node, pl.Module.Name)
		d.Queues = append(d.Queues, Queue{
			Name: q, Vhost: wire.AMQPVhost, Durable: true,
			Arguments: map[string]any{
				wire.ArgQueueType:          wire.QueueQuorum,
				wire.ArgDeliveryLimit:      wire.DeliveryLimit(in.MaxDeliver),
				wire.ArgDeadLetterExchange: wire.ExchangeDead,
			},
		})
		for _, key := range bindingKeys(pl.Module) {
			d.Bindings = append(d.Bindings, binding(wire.ExchangeEvents, q, key))
		}
	}
	// One service queue per tool, whatever the number of nodes running
	// the module: every runtime serving the tool competes on it.
	for _, mod := range m.Modules {
		for _, tool := range mod.AllTools() {
			q := wire.ServiceQueue(mod.Name, tool)
			d.Queues = append(d.Queues, Queue{
				Name: q, Vhost: wire.AMQPVhost, Durable: true,
				Arguments: map[string]any{wire.ArgQueueType: wire.QueueClassic},
			})
			d.Bindings = append(d.Bindings, binding(wire.ExchangeRPC, q, q))
		}
	}
	if err := control(m, in, &d); err != nil {
		return Definitions{}, err
	}
	slices.SortFunc(d.Queues, func(a, b Queue) int { return strings.Compare(a.Vhost+"\x00"+a.Name, b.Vhost+"\x00"+b.Name) })
	slices.SortFunc(d.Bindings, func(a, b Binding) int {
		return strings.Compare(a.Vhost+"\x00"+a.Source+"\x00"+a.Destination+"\x00"+a.RoutingKey, b.Vhost+"\x00"+b.Source+"\x00"+b.Destination+"\x00"+b.RoutingKey)
	})
	return d, nil
}

// grants are one user's permissions and topic permissions.
type grants struct {
	permission Permission
	topics     []TopicPermission
}

// moduleGrants derives a module user's grants from its manifest alone.
func moduleGrants(m *meshdesc.Mesh, node string, mod meshdesc.Module) grants {
	user := wire.AMQPUser(node, mod.Name)
	var write, read, emitKeys, callKeys []string
	for _, key := range mod.AllEmits() {
		emitKeys = append(emitKeys, exact(wire.EventRoutingKey(mod.Name, key)))
	}
	callKeys = toolKeys(m.ResolveTools(mod.Uses))
	if len(emitKeys) > 0 {
		write = append(write, exact(wire.ExchangeEvents))
	}
	if len(callKeys) > 0 {
		write = append(write, exact(wire.ExchangeRPC))
	}
	if len(mod.AllTools()) > 0 {
		write = append(write, exact(wire.ExchangeDefault))
	}
	if len(mod.Consumes) > 0 {
		read = append(read, exact(wire.EventsQueue(node, mod.Name)))
	}
	for _, tool := range mod.AllTools() {
		read = append(read, exact(wire.ServiceQueue(mod.Name, tool)))
	}
	var bindKeys []string
	for _, key := range bindingKeys(mod) {
		bindKeys = append(bindKeys, exact(key))
	}
	return grants{
		permission: permission(user, nothing, anyOf(write), anyOf(read)),
		topics: []TopicPermission{
			topic(user, wire.ExchangeEvents, anyOf(emitKeys), anyOf(bindKeys)),
			topic(user, wire.ExchangeRPC, anyOf(callKeys), nothing),
		},
	}
}

// personGrants: a person's client calls the tools it was issued and
// nothing else.
func personGrants(m *meshdesc.Mesh, p meshdesc.Person) grants {
	user := wire.PersonUser(p.Name)
	callKeys := toolKeys(m.ResolveTools(p.Tools))
	var write []string
	if len(callKeys) > 0 {
		write = append(write, exact(wire.ExchangeRPC))
	}
	return grants{
		permission: permission(user, nothing, anyOf(write), nothing),
		topics: []TopicPermission{
			topic(user, wire.ExchangeEvents, nothing, nothing),
			topic(user, wire.ExchangeRPC, anyOf(callKeys), nothing),
		},
	}
}

// bindingKeys are the binding keys of a module's events queue, one per
// consumed pattern, in manifest order without repeats.
func bindingKeys(mod meshdesc.Module) []string {
	var out []string
	for _, c := range mod.Consumes {
		if k := wire.EventBindingKey(c); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// toolKeys are the routing-key expressions of resolved tool references on
// mesh.rpc: ResolveTools has expanded every wildcard to declared tools,
// so each is one tool's exact key.
func toolKeys(refs []meshdesc.ToolRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, regexp.QuoteMeta(wire.ServiceQueue(r.Module, r.Tool)))
	}
	return out
}

// nothing is the regular expression that matches no name: RabbitMQ's
// spelling of "no permission".
const nothing = "^$"

// exact is the alternative matching one name.
func exact(name string) string { return regexp.QuoteMeta(name) }

// anyOf anchors alternatives into one expression, sorted and without
// repeats so that it does not depend on manifest order; none is nothing.
func anyOf(alts []string) string {
	if len(alts) == 0 {
		return nothing
	}
	alts = slices.Clone(alts)
	slices.Sort(alts)
	return "^(" + strings.Join(slices.Compact(alts), "|") + ")$"
}

func permission(user, configure, write, read string) Permission {
	return Permission{User: user, Vhost: wire.AMQPVhost, Configure: configure, Write: write, Read: read}
}

func topic(user, exchange, write, read string) TopicPermission {
	return TopicPermission{User: user, Vhost: wire.AMQPVhost, Exchange: exchange, Write: write, Read: read}
}

func exchange(name, kind string) Exchange {
	return Exchange{Name: name, Vhost: wire.AMQPVhost, Type: kind, Durable: true, Arguments: map[string]any{}}
}

func binding(source, queue, key string) Binding {
	return Binding{Source: source, Vhost: wire.AMQPVhost, Destination: queue, DestinationType: "queue", RoutingKey: key, Arguments: map[string]any{}}
}

// inVhost moves a grant or an object into virtual host vhost.
func inVhost[T Permission | TopicPermission | Exchange | Queue | Binding](vhost string, v T) T {
	switch p := any(&v).(type) {
	case *Permission:
		p.Vhost = vhost
	case *TopicPermission:
		p.Vhost = vhost
	case *Exchange:
		p.Vhost = vhost
	case *Queue:
		p.Vhost = vhost
	case *Binding:
		p.Vhost = vhost
	}
	return v
}

// HashPassword is RabbitMQ's rabbit_password_hashing_sha256 hash of
// password with a 4-byte salt: base64(salt + sha256(salt + password)).
func HashPassword(password string, salt [4]byte) string {
	sum := sha256.Sum256(append(salt[:], password...))
	return base64.StdEncoding.EncodeToString(append(salt[:], sum[:]...))
}

// PasswordHash is HashPassword with a salt derived from the password
// itself, so the same password always has the same hash: the controller
// keeps one secret per principal for both buses (its store's), and the
// broker's users compare equal from one composition to the next, so
// amqpadmin changes nothing where nothing changed. The salt only fills
// RabbitMQ's format: what protects the hash is the password's 192 random
// bits (rollout.MintSecret), which no salt would make harder to guess.
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte("mesh amqp salt\x00" + password))
	return HashPassword(password, [4]byte(sum[:4]))
}

// NewPasswordHash hashes password with a random salt.
func NewPasswordHash(password string) (string, error) {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return HashPassword(password, salt), nil
}
