package natsplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Report says what one assertion changed on the server. An assertion
// against a server that already matches reports nothing.
type Report struct {
	// Created lists "stream NAME" and "consumer STREAM/NAME" entries.
	Created []string
	// Corrected lists the objects updated in place, with their fields.
	Corrected []string
	// Deleted lists consumers that the description no longer has.
	Deleted []string
}

// Changed reports whether the assertion changed anything.
func (r Report) Changed() bool {
	return len(r.Created)+len(r.Corrected)+len(r.Deleted) > 0
}

// step is one change the assertion will make once everything has been
// inspected and found correctable.
type step struct {
	what   string
	kind   string // created, corrected, deleted
	fields []fieldDiff
	do     func(ctx context.Context) error
}

// Assert makes the server's streams and consumers what d says, in d's
// order. It inspects everything first: if any object has drifted on a
// field the server cannot update, it changes nothing and returns every
// such drift, each wrapping ErrDrift. Otherwise it creates what is
// missing, updates what drifted (logging "corrected" with the fields) and
// deletes the consumers of a pruned stream that d does not list. An
// object that matches is not touched.
func Assert(ctx context.Context, js JetStreams, d Desired, log *slog.Logger) (Report, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	steps, err := plan(ctx, js, d)
	if err != nil {
		return Report{}, err
	}
	var r Report
	for _, s := range steps {
		if err := s.do(ctx); err != nil {
			return r, fmt.Errorf("assert %s: %w", s.what, err)
		}
		switch s.kind {
		case "created":
			r.Created = append(r.Created, s.what)
			log.Info("created", "object", s.what)
		case "corrected":
			r.Corrected = append(r.Corrected, fmt.Sprintf("%s %v", s.what, diffNames(s.fields)))
			attrs := []any{"object", s.what, "fields", diffNames(s.fields)}
			for _, f := range s.fields {
				attrs = append(attrs, slog.Group(f.field, "expected", f.expected, "actual", f.actual))
			}
			log.Warn("corrected", attrs...)
		case "deleted":
			r.Deleted = append(r.Deleted, s.what)
			log.Warn("deleted", "object", s.what, "why", "no placement in the description consumes through it")
		}
	}
	return r, nil
}

func plan(ctx context.Context, jss JetStreams, d Desired) ([]step, error) {
	var steps []step
	var drifts []error
	for _, ds := range d.Streams {
		name := ds.Config.Name
		what := "stream " + name
		js, err := jss.For(name)
		if err != nil {
			return nil, err
		}
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := ds.Config
			steps = append(steps, step{what: what, kind: "created", do: func(ctx context.Context) error {
				_, err := js.CreateStream(ctx, cfg)
				return err
			}})
			for _, cc := range ds.Consumers {
				steps = append(steps, createConsumer(js, name, cc))
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", what, err)
		}
		got := s.CachedInfo().Config
		diffs := streamDiffs(ds.Config, got)
		if err := driftError(what, diffs); err != nil {
			drifts = append(drifts, err)
		} else if len(diffs) > 0 {
			cfg := correctedStream(ds.Config, got)
			steps = append(steps, step{what: what, kind: "corrected", fields: diffs, do: func(ctx context.Context) error {
				_, err := js.UpdateStream(ctx, cfg)
				return err
			}})
		}

		existing, err := listConsumers(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("list consumers of %s: %w", what, err)
		}
		for _, cc := range ds.Consumers {
			got, ok := existing[cc.Durable]
			if !ok {
				steps = append(steps, createConsumer(js, name, cc))
				continue
			}
			cwhat := "consumer " + name + "/" + cc.Durable
			diffs := consumerDiffs(cc, got)
			if err := driftError(cwhat, diffs); err != nil {
				drifts = append(drifts, err)
			} else if len(diffs) > 0 {
				cfg := correctedConsumer(cc, got)
				steps = append(steps, step{what: cwhat, kind: "corrected", fields: diffs, do: func(ctx context.Context) error {
					_, err := js.UpdateConsumer(ctx, name, cfg)
					return err
				}})
			}
		}
		if ds.Prune {
			for _, cname := range sortedKeys(existing) {
				if slices.ContainsFunc(ds.Consumers, func(c jetstream.ConsumerConfig) bool { return c.Durable == cname }) {
					continue
				}
				steps = append(steps, step{what: "consumer " + name + "/" + cname, kind: "deleted", do: func(ctx context.Context) error {
					return js.DeleteConsumer(ctx, name, cname)
				}})
			}
		}
	}
	if len(drifts) > 0 {
		return nil, errors.Join(drifts...)
	}
	return steps, nil
}

func createConsumer(js jetstream.JetStream, stream string, cc jetstream.ConsumerConfig) step {
	return step{what: "consumer " + stream + "/" + cc.Durable, kind: "created", do: func(ctx context.Context) error {
		_, err := js.CreateConsumer(ctx, stream, cc)
		return err
	}}
}

// listConsumers maps a stream's consumers by name to their configuration.
func listConsumers(ctx context.Context, s jetstream.Stream) (map[string]jetstream.ConsumerConfig, error) {
	out := map[string]jetstream.ConsumerConfig{}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		out[ci.Name] = ci.Config
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
