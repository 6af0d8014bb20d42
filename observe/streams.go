package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream is what the server says of one stream and its consumers.
type Stream struct {
	// Account is the account it was read in, where the reader says so.
	Account   string
	Config    jetstream.StreamConfig
	Created   time.Time
	Consumers map[string]Consumer
	// Msgs is how many messages it holds; LastSeq the sequence of the
	// last one it stored (a purge keeps it).
	Msgs, LastSeq uint64
}

// Consumer is what the server says of one consumer.
type Consumer struct {
	Config  jetstream.ConsumerConfig
	Created time.Time
	// Delivered counts the deliveries it has made (its own sequence, which
	// a purge of its stream keeps).
	Delivered uint64
	// Pending are the messages it has yet to deliver; AckPending those
	// delivered and not acknowledged, Redelivered those of them delivered
	// more than once; Waiting the pull requests waiting on it.
	Pending                          uint64
	AckPending, Redelivered, Waiting int
}

// Streams reads every stream and consumer the server has.
func Streams(ctx context.Context, js jetstream.JetStream) (map[string]Stream, error) {
	out := map[string]Stream{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("read stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		st := Stream{Config: info.Config, Created: info.Created, Consumers: map[string]Consumer{}, Msgs: info.State.Msgs, LastSeq: info.State.LastSeq}
		cons := s.ListConsumers(ctx)
		for ci := range cons.Info() {
			st.Consumers[ci.Name] = Consumer{
				Config: ci.Config, Created: ci.Created,
				Delivered: ci.Delivered.Consumer,
				Pending:   ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting,
			}
		}
		if err := cons.Err(); err != nil {
			return nil, fmt.Errorf("list consumers of %s: %w", name, err)
		}
		out[name] = st
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return out, nil
}

// Diff lists every difference between two readings: a stream or consumer
// that appeared, vanished, was recreated (another creation time) or whose
// configuration changed.
func Diff(before, after map[string]Stream) []string {
	var out []string
	for _, name := range keys(before, after) {
		b, inB := before[name]
		a, inA := after[name]
		switch {
		case !inA:
			out = append(out, fmt.Sprintf("stream %s vanished", name))
			continue
		case !inB:
			out = append(out, fmt.Sprintf("stream %s appeared", name))
			continue
		}
		if !b.Created.Equal(a.Created) {
			out = append(out, fmt.Sprintf("stream %s was recreated (created %s, now %s)", name, b.Created.Format(time.RFC3339Nano), a.Created.Format(time.RFC3339Nano)))
		}
		if !sameJSON(b.Config, a.Config) {
			out = append(out, fmt.Sprintf("stream %s configuration changed:\n  before %s\n  after  %s", name, js(b.Config), js(a.Config)))
		}
		for _, c := range keys(b.Consumers, a.Consumers) {
			bc, inB := b.Consumers[c]
			ac, inA := a.Consumers[c]
			switch {
			case !inA:
				out = append(out, fmt.Sprintf("consumer %s/%s vanished", name, c))
			case !inB:
				out = append(out, fmt.Sprintf("consumer %s/%s appeared", name, c))
			case !bc.Created.Equal(ac.Created):
				out = append(out, fmt.Sprintf("consumer %s/%s was recreated", name, c))
			case !sameJSON(bc.Config, ac.Config):
				out = append(out, fmt.Sprintf("consumer %s/%s configuration changed:\n  before %s\n  after  %s", name, c, js(bc.Config), js(ac.Config)))
			}
		}
	}
	return out
}

// Reset says what a reset of a cluster put back, and so how a reading
// taken after it may differ from one taken when the cluster was raised:
// the Purged streams were emptied, whatever they held, and the Driven
// consumers delivered (they count more deliveries).
type Reset struct {
	Purged, Driven []string
}

// AsRaised lists every way now differs from raised beyond what reset
// allows: each of Diff's differences; a stream holding other messages
// than it did (a purged one: any message, or a purge that lost what it
// held when raised); a consumer with messages pending, unacknowledged,
// redelivered or pull requests waiting that it did not have; a consumer
// not driven that delivered since. Empty: no later reader can tell the
// cluster from the one raised, by its streams.
func AsRaised(raised, now map[string]Stream, reset Reset) []string {
	out := Diff(raised, now)
	for name, was := range raised {
		is, ok := now[name]
		if !ok {
			continue // Diff named it
		}
		switch {
		case !slices.Contains(reset.Purged, name):
			if is.Msgs != was.Msgs || is.LastSeq != was.LastSeq {
				out = append(out, fmt.Sprintf("stream %s holds %d messages up to sequence %d; it held %d up to %d", name, is.Msgs, is.LastSeq, was.Msgs, was.LastSeq))
			}
		case was.Msgs != 0:
			out = append(out, fmt.Sprintf("stream %s held %d messages when raised; a purge lost them", name, was.Msgs))
		case is.Msgs != 0:
			out = append(out, fmt.Sprintf("stream %s holds %d messages after its purge", name, is.Msgs))
		}
		for c, wasC := range was.Consumers {
			isC, ok := is.Consumers[c]
			if !ok {
				continue
			}
			if isC.Pending != wasC.Pending || isC.AckPending != wasC.AckPending || isC.Redelivered != wasC.Redelivered || isC.Waiting != wasC.Waiting {
				out = append(out, fmt.Sprintf("consumer %s/%s has %d pending, %d unacknowledged, %d redelivered, %d pull requests waiting; it had %d, %d, %d, %d",
					name, c, isC.Pending, isC.AckPending, isC.Redelivered, isC.Waiting, wasC.Pending, wasC.AckPending, wasC.Redelivered, wasC.Waiting))
			}
			if isC.Delivered != wasC.Delivered && !slices.Contains(reset.Driven, c) {
				out = append(out, fmt.Sprintf("consumer %s/%s has made %d deliveries, %d when raised, and nothing drove it", name, c, isC.Delivered, wasC.Delivered))
			}
		}
	}
	slices.Sort(out)
	return out
}

func keys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sameJSON(a, b any) bool { return js(a) == js(b) }

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}
