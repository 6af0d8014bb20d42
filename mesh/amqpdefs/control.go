package amqpdefs

// The control plane's virtual host (wire.AMQPControlVhost), the AMQP side
// of docs/decisions/0001, 0007 and 0009. Its users never share a virtual
// host with a module or a person: RabbitMQ lets write on amq.default
// reach every queue of a virtual host by name, and a module that serves
// a tool must have it; from another virtual host nothing is reached by
// name (RABBITMQ-NOTES.md).
//
// Only the controller may configure, and only it may write amq.default,
// so only it routes by queue name. Everyone else writes the one topic
// exchange wire.ExchangeControl, and there only the routing keys (wire
// subjects) of its own principal; each reads its own queue and no other.

import (
	"fmt"
	"time"

	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Bounds of the control plane's queues.
const (
	// DefaultControlPerSubject is the controller's ControlPerSubject on
	// NATS (CONTROL's MaxMsgsPerSubject): a host's reports every 15 s for
	// an hour while the store is away.
	DefaultControlPerSubject = 256
	// AliveTTL is how long a heartbeat is worth keeping: the controller's
	// QuietAfter. An older one says nothing a newer one does not, and a
	// heartbeat kept across a broker's restart would lie.
	AliveTTL = 20 * time.Second
	// CredentialRequests bounds a node's credential requests waiting for
	// the controller (and its answers waiting for the host), and
	// CredentialRequestTTL how long one waits: its host has given up on
	// it by then (a request is asked again, never kept; core
	// request/reply on NATS).
	CredentialRequests   = 4
	CredentialRequestTTL = 30 * time.Second
	// FetchTTL is how long a fetch and its answer wait: the builder's
	// wait for an answer (build.DefaultFetchTimeout); it has given up on
	// the fetch by then. Fetches bounds how many wait, per repository and
	// for the builder.
	FetchTTL = 30 * time.Second
	Fetches  = 16
	// ArtifactsRetention bounds the artifacts' stream in bytes (ARTIFACTS'
	// MaxBytes on NATS): the oldest artifacts go first.
	ArtifactsRetention = 512 << 20
	// ArtifactCopyTTL is how long a chunk the controller copied for a host
	// waits in its queue: the host reads them as they come, and one it
	// stopped waiting for is of no use. CopiedBytes bounds that queue: two
	// of the largest artifacts.
	ArtifactCopyTTL = 5 * time.Minute
	CopiedBytes     = 2 * wire.MaxArtifact
	// EnrolAnswerExpires deletes a token's answer queue unused for so
	// long (x-expires): a token spent or forgotten leaves nothing behind.
	EnrolAnswerExpires = 24 * time.Hour
)

// ControlUsers lists the users of the control plane's virtual host, in
// the definitions' order: the controller, each node's host, each
// enrolment token, the builder, each source repository (compose's order).
func ControlUsers(m *meshdesc.Mesh) []string {
	out := []string{wire.ControllerUser}
	for _, n := range m.Nodes {
		out = append(out, wire.HostUser(n.Name))
	}
	for _, t := range m.Tokens {
		out = append(out, wire.EnrolUser(t.ID))
	}
	out = append(out, wire.BuilderUser)
	for _, s := range m.Sources {
		out = append(out, wire.SourceUser(s.Name))
	}
	return out
}

// control adds the control plane's grants and topology to d.
func control(m *meshdesc.Mesh, in Inputs, d *Definitions) error {
	const vh = wire.AMQPControlVhost
	add := func(user string, write, read []string, keys []string) {
		d.Permissions = append(d.Permissions, inVhost(vh, permission(user, nothing, anyOf(write), anyOf(read))))
		d.TopicPermissions = append(d.TopicPermissions, inVhost(vh, topic(user, wire.ExchangeControl, anyOf(keys), nothing)))
	}
	// The controller asserts the topology, reads every queue and answers
	// through the default exchange (an enrolment's answer queue, a
	// host's direct reply-to), after its own check of the name.
	d.Permissions = append(d.Permissions, inVhost(vh, permission(wire.ControllerUser, ".*", ".*", ".*")))
	writeControl := []string{exact(wire.ExchangeControl)}
	for _, n := range m.Nodes {
		add(wire.HostUser(n.Name), writeControl, []string{
			exact(wire.NodeQueue(n.Name)), exact(wire.CredentialsQueue(n.Name)), exact(wire.ArtifactsQueue(n.Name)),
		}, []string{
			exact(wire.NodeReport(n.Name)), exact(wire.NodeAlive(n.Name)), exact(wire.NodeCredentials(n.Name)), exact(wire.NodeArtifact(n.Name)),
		})
	}
	for _, t := range m.Tokens {
		add(wire.EnrolUser(t.ID), writeControl, []string{exact(wire.EnrolQueue(t.ID))}, []string{exact(wire.SubjectEnrol)})
	}
	// The builder fetches from any repository and stores chunks under
	// any artifact's key: it names the artifact by the digest of what it
	// built. Only the controller reads them (QueueArtifacts).
	builderKeys := []string{exact(wire.SubjectBuilt), artifactChunkKey}
	for _, s := range m.Sources {
		builderKeys = append(builderKeys, exact(wire.SourceFetch(s.Name)))
	}
	add(wire.BuilderUser, writeControl, []string{exact(wire.QueueBuilds), exact(wire.QueueFetched)}, builderKeys)
	for _, s := range m.Sources {
		add(wire.SourceUser(s.Name), writeControl, []string{exact(wire.SourceFetchQueue(s.Name))}, []string{
			exact(wire.SourceChanged(s.Name)), exact(wire.SourceFetched(s.Name)),
		})
	}

	d.Exchanges = append(d.Exchanges, inVhost(vh, exchange(wire.ExchangeControl, wire.ExchangeTopic)))
	// CONTROL: a queue per subject, refusing past its bound.
	held := func(subject string) error {
		q, err := wire.ControlQueue(subject)
		if err != nil {
			return fmt.Errorf("build definitions: %w", err)
		}
		d.Queues = append(d.Queues, quorum(q, map[string]any{
			wire.ArgMaxLength: in.ControlPerSubject,
			wire.ArgOverflow:  wire.OverflowRejectPublish,
		}))
		d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, q, subject)))
		return nil
	}
	// What is never kept: the newest heartbeat, the waiting credential
	// requests, in classic queues whose messages expire.
	passing := func(subject string, args map[string]any) error {
		q, err := wire.ControlQueue(subject)
		if err != nil {
			return fmt.Errorf("build definitions: %w", err)
		}
		args[wire.ArgQueueType] = wire.QueueClassic
		d.Queues = append(d.Queues, inVhost(vh, Queue{Name: q, Durable: true, Arguments: args}))
		d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, q, subject)))
		return nil
	}
	subjects := []string{wire.SubjectEnrol, wire.SubjectBuilt, wire.SubjectPush}
	for _, n := range m.Nodes {
		subjects = append(subjects, wire.NodeReport(n.Name))
	}
	for _, s := range m.Sources {
		subjects = append(subjects, wire.SourceChanged(s.Name))
	}
	for _, s := range subjects {
		if err := held(s); err != nil {
			return err
		}
	}
	for _, n := range m.Nodes {
		if err := passing(wire.NodeAlive(n.Name), map[string]any{
			wire.ArgMaxLength:  1,
			wire.ArgOverflow:   wire.OverflowDropHead,
			wire.ArgMessageTTL: AliveTTL.Milliseconds(),
		}); err != nil {
			return err
		}
		if err := passing(wire.NodeCredentials(n.Name), map[string]any{
			wire.ArgMaxLength:  CredentialRequests,
			wire.ArgOverflow:   wire.OverflowRejectPublish,
			wire.ArgMessageTTL: CredentialRequestTTL.Milliseconds(),
		}); err != nil {
			return err
		}
		// NODES: the newest declaration only, read without being taken.
		// A classic queue, not a quorum one: its host reads it and gives
		// it back (basic.get, then a requeue), and a classic queue of one
		// drops the message given back when a newer one came meanwhile
		// (drop-head), where a quorum queue keeps both and hands the
		// newer first (RABBITMQ-NOTES.md). Durable, the declarations
		// persistent: it outlives the broker's restart.
		q := wire.NodeQueue(n.Name)
		d.Queues = append(d.Queues, inVhost(vh, Queue{Name: q, Durable: true, Arguments: map[string]any{
			wire.ArgQueueType: wire.QueueClassic,
			wire.ArgMaxLength: 1,
			wire.ArgOverflow:  wire.OverflowDropHead,
		}}))
		d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, q, wire.NodeDeclare(n.Name))))
	}
	// BUILDS: a work queue the builders share, one build at a time
	// mesh-wide as on NATS (BUILDS' consumer, MaxAckPending 1): the one
	// active builder is the one fetching, so the answers share one queue.
	d.Queues = append(d.Queues, quorum(wire.QueueBuilds, map[string]any{
		wire.ArgMaxLength:            in.ControlPerSubject,
		wire.ArgOverflow:             wire.OverflowRejectPublish,
		wire.ArgSingleActiveConsumer: true,
	}))
	d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, wire.QueueBuilds, wire.SubjectBuildRequest)))
	buildPath(m, d)
	// The answers: reached through the default exchange by the controller
	// alone, so bound to nothing. A node's credentials, newest first and
	// gone once its host has given up; an enrolment's, kept until read.
	for _, n := range m.Nodes {
		d.Queues = append(d.Queues, inVhost(vh, Queue{Name: wire.CredentialsQueue(n.Name), Durable: true, Arguments: map[string]any{
			wire.ArgQueueType:  wire.QueueClassic,
			wire.ArgMaxLength:  CredentialRequests,
			wire.ArgOverflow:   wire.OverflowDropHead,
			wire.ArgMessageTTL: CredentialRequestTTL.Milliseconds(),
		}}))
	}
	for _, t := range m.Tokens {
		d.Queues = append(d.Queues, inVhost(vh, Queue{Name: wire.EnrolQueue(t.ID), Durable: true, Arguments: map[string]any{
			wire.ArgQueueType: wire.QueueClassic,
			wire.ArgMaxLength: 1,
			wire.ArgOverflow:  wire.OverflowDropHead,
			wire.ArgExpires:   EnrolAnswerExpires.Milliseconds(),
		}}))
	}
	return nil
}

// artifactChunkKey is every artifact chunk's key (wire.ArtifactChunk), as
// a topic permission's expression.
var artifactChunkKey = `mesh\.artifact\.[0-9a-f]{64}\.(0|[1-9][0-9]{0,2})`

// buildPath adds the queues of docs/decisions/0011 to d: the fetches and
// their answers, the artifacts' stream, and each node's request queue and
// the queue its artifacts are copied into.
func buildPath(m *meshdesc.Mesh, d *Definitions) {
	const vh = wire.AMQPControlVhost
	classic := func(name string, args map[string]any) {
		args[wire.ArgQueueType] = wire.QueueClassic
		d.Queues = append(d.Queues, inVhost(vh, Queue{Name: name, Durable: true, Arguments: args}))
	}
	for _, s := range m.Sources {
		q := wire.SourceFetchQueue(s.Name)
		classic(q, map[string]any{
			wire.ArgMaxLength:  Fetches,
			wire.ArgOverflow:   wire.OverflowRejectPublish,
			wire.ArgMessageTTL: FetchTTL.Milliseconds(),
		})
		d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, q, wire.SourceFetch(s.Name))))
	}
	classic(wire.QueueFetched, map[string]any{
		wire.ArgMaxLength:  Fetches,
		wire.ArgOverflow:   wire.OverflowDropHead,
		wire.ArgMessageTTL: FetchTTL.Milliseconds(),
	})
	d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, wire.QueueFetched, wire.BindingFetched)))
	// ARTIFACTS: a stream, read from an offset as often as asked, never
	// taken away; the controller alone reads it.
	d.Queues = append(d.Queues, inVhost(vh, Queue{Name: wire.QueueArtifacts, Durable: true, Arguments: map[string]any{
		wire.ArgQueueType:      wire.QueueStream,
		wire.ArgMaxLengthBytes: ArtifactsRetention,
	}}))
	d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, wire.QueueArtifacts, wire.BindingArtifacts)))
	for _, n := range m.Nodes {
		q, _ := wire.ControlQueue(wire.NodeArtifact(n.Name)) // a control subject by construction
		classic(q, map[string]any{
			wire.ArgMaxLength:  CredentialRequests,
			wire.ArgOverflow:   wire.OverflowRejectPublish,
			wire.ArgMessageTTL: CredentialRequestTTL.Milliseconds(),
		})
		d.Bindings = append(d.Bindings, inVhost(vh, binding(wire.ExchangeControl, q, wire.NodeArtifact(n.Name))))
		// Reached through the default exchange by the controller alone.
		classic(wire.ArtifactsQueue(n.Name), map[string]any{
			wire.ArgMaxLengthBytes: CopiedBytes,
			wire.ArgOverflow:       wire.OverflowDropHead,
			wire.ArgMessageTTL:     ArtifactCopyTTL.Milliseconds(),
		})
	}
}

// quorum is a durable quorum queue of the control plane.
func quorum(name string, args map[string]any) Queue {
	args[wire.ArgQueueType] = wire.QueueQuorum
	return inVhost(wire.AMQPControlVhost, Queue{Name: name, Durable: true, Arguments: args})
}
