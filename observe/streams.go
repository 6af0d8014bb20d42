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
}

// Consumer is what the server says of one consumer.
type Consumer struct {
	Config  jetstream.ConsumerConfig
	Created time.Time
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
		st := Stream{Config: info.Config, Created: info.Created, Consumers: map[string]Consumer{}}
		cons := s.ListConsumers(ctx)
		for ci := range cons.Info() {
			st.Consumers[ci.Name] = Consumer{Config: ci.Config, Created: ci.Created}
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
