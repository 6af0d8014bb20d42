package natsplane

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// Desired is everything the controller asserts on the bus.
type Desired struct {
	// Streams are in creation order (wire.Streams): DEAD first, so the
	// max-deliveries advisory has a listener before anything can fail.
	Streams []DesiredStream
}

// DesiredStream is one stream and the consumers on it.
type DesiredStream struct {
	Config    jetstream.StreamConfig
	Consumers []jetstream.ConsumerConfig
	// Prune deletes the stream's consumers that are not listed: on EVENTS
	// the controller is the only writer of consumers, so one it does not
	// know belongs to a placement that no longer exists.
	Prune bool
}

// DesiredState derives the streams and consumers from the description and
// the policy. It reads names and subjects from mesh/wire only.
func DesiredState(m *meshdesc.Mesh, p Policy) Desired {
	byName := map[string]DesiredStream{
		wire.StreamDead: {Config: jetstream.StreamConfig{
			Name:      wire.StreamDead,
			Subjects:  wire.StreamSubjects(wire.StreamDead),
			Retention: jetstream.LimitsPolicy,
			Storage:   jetstream.FileStorage,
			MaxAge:    p.DeadMaxAge,
		}},
		wire.StreamControl: {
			Config: jetstream.StreamConfig{
				Name:                 wire.StreamControl,
				Subjects:             wire.StreamSubjects(wire.StreamControl),
				Retention:            jetstream.WorkQueuePolicy,
				Storage:              jetstream.FileStorage,
				MaxMsgsPerSubject:    p.ControlPerSubject,
				DiscardNewPerSubject: p.ControlPerSubject > 0,
			},
			Consumers: []jetstream.ConsumerConfig{workConsumer(wire.ControlConsumer)},
		},
		wire.StreamNodes: {Config: jetstream.StreamConfig{
			Name:              wire.StreamNodes,
			Subjects:          wire.StreamSubjects(wire.StreamNodes),
			Retention:         jetstream.LimitsPolicy,
			Storage:           jetstream.FileStorage,
			MaxMsgsPerSubject: 1,
			// A host reads its newest declaration by a direct get, the one
			// API subject it is granted (compose's host).
			AllowDirect: true,
		}},
		wire.StreamBuilds: {
			Config: jetstream.StreamConfig{
				Name:      wire.StreamBuilds,
				Subjects:  wire.StreamSubjects(wire.StreamBuilds),
				Retention: jetstream.WorkQueuePolicy,
				Storage:   jetstream.FileStorage,
			},
			Consumers: []jetstream.ConsumerConfig{buildsConsumer(p)},
		},
		wire.StreamArtifacts: {Config: jetstream.StreamConfig{
			Name:              wire.StreamArtifacts,
			Subjects:          wire.StreamSubjects(wire.StreamArtifacts),
			Retention:         jetstream.LimitsPolicy,
			Storage:           jetstream.FileStorage,
			MaxMsgsPerSubject: 1,
			// A host reads the chunks of its artifacts by direct gets, the
			// API subjects it is granted (compose's host).
			AllowDirect: true,
			Duplicates:  p.EventsDuplicates,
		}},
		wire.StreamEvents: {
			Config: jetstream.StreamConfig{
				Name:       wire.StreamEvents,
				Subjects:   wire.StreamSubjects(wire.StreamEvents),
				Retention:  jetstream.LimitsPolicy,
				Storage:    jetstream.FileStorage,
				MaxAge:     p.EventsMaxAge,
				Duplicates: p.EventsDuplicates,
			},
			Consumers: append(moduleConsumers(m, p), statusConsumer()),
			Prune:     true,
		},
	}
	var d Desired
	for _, name := range wire.Streams {
		ds := byName[name]
		ds.Config.MaxBytes = p.Bytes[name]
		ds.Config.MaxMsgSize = p.MsgSize[name]
		ds.Config.Discard = p.Discard[name]
		d.Streams = append(d.Streams, ds)
	}
	return d
}

// workConsumer is the one durable pull consumer of a work-queue stream: a
// work queue requires explicit acks and DeliverAll.
func workConsumer(name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    unlimitedDeliveries,
	}
}

// buildsConsumer is the builders' shared consumer on BUILDS: one build at a
// time, and a builder that dies mid-build has its request redelivered
// after BuildsAckWait (a builder at work says so more often).
func buildsConsumer(p Policy) jetstream.ConsumerConfig {
	c := workConsumer(wire.BuildsConsumer)
	c.MaxAckPending = 1
	c.AckWait = p.BuildsAckWait
	return c
}

// statusConsumer is the controller's own consumer on EVENTS, from which
// FollowStatus folds the status. One delivery at a time: the status is a
// fold in stream order, and a redelivery overtaken by a later event would
// be taken for one already applied. It never gives a message up, since a
// failing word lost would be a failure nobody hears of.
func statusConsumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        wire.StatusConsumer,
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		FilterSubjects: wire.ProvisionerStatusEvents,
		MaxDeliver:     unlimitedDeliveries,
		MaxAckPending:  1,
	}
}

// moduleConsumers is one durable pull consumer per placement of a module
// that consumes something, filtered to exactly what its manifest consumes.
func moduleConsumers(m *meshdesc.Mesh, p Policy) []jetstream.ConsumerConfig {
	var out []jetstream.ConsumerConfig
	for _, pl := range m.Placements() {
		if len(pl.Module.Consumes) == 0 {
			continue
		}
		out = append(out, jetstream.ConsumerConfig{
			Durable:       wire.ModuleConsumer(pl.Node, pl.Module.Name),
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			// The same derivation as the module's grants, so what the
			// consumer delivers and what the module may hear cannot part.
			FilterSubjects: reduceFilters(compose.ConsumerFilters(pl.Module)),
			MaxDeliver:     p.EventsMaxDeliver,
			AckWait:        p.EventsAckWait,
		})
	}
	return out
}

// reduceFilters drops repeated filters and filters covered by another one:
// the server refuses a consumer whose filters overlap (one a subset of
// another), while a manifest may well consume both sensor.alarm.> and
// sensor.alarm.raised. The union of what is delivered is unchanged.
func reduceFilters(filters []string) []string {
	var out []string
	for i, f := range filters {
		covered := false
		for j, g := range filters {
			if i == j {
				continue
			}
			// Of two equal filters keep the first; a strict subset goes.
			if f == g && j < i || f != g && subjectSubset(f, g) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, f)
		}
	}
	return out
}

// subjectSubset reports whether every subject matching pattern a also
// matches pattern b.
func subjectSubset(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range tb {
		if t == ">" {
			return len(ta) > i
		}
		if i >= len(ta) || ta[i] == ">" {
			return false
		}
		if t != "*" && ta[i] != t {
			return false
		}
	}
	return len(ta) == len(tb)
}
