package sdk

import (
	"log/slog"
	"time"
)

// DefaultTimeout bounds what waits without a caller's deadline: a call
// whose context has none, binding the consumer, serving a tool, a drain.
const DefaultTimeout = 10 * time.Second

type config struct {
	log        *slog.Logger
	timeout    time.Duration
	redelivery time.Duration
}

// Option changes how Connect connects.
type Option func(*config)

// WithLogger sends the SDK's lines (a refused envelope, a failed handler,
// an environment overwritten) to l instead of slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithTimeout replaces DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithRedelivery replaces DefaultRedelivery: how long a failing handler's
// event waits before it is delivered the second time, each wait after
// twice the one before, up to 30 s. Shorter rides out a shorter outage in
// the same deliveries; a test that proves the deliveries, not the outage
// they ride out, spends less time waiting. Zero or less keeps the
// default.
func WithRedelivery(first time.Duration) Option {
	return func(c *config) {
		if first > 0 {
			c.redelivery = first
		}
	}
}

type publishConfig struct {
	id, causation, schema string
	at                    time.Time
}

// PublishOption sets an optional part of an emitted event.
type PublishOption func(*publishConfig)

// WithCausation sets x-causation-id: the event or command that caused this one.
func WithCausation(id string) PublishOption { return func(p *publishConfig) { p.causation = id } }

// WithSchema sets x-schema: the version of the body's shape.
func WithSchema(version string) PublishOption { return func(p *publishConfig) { p.schema = version } }

// WithEventID sets x-event-id instead of a new random one: a retried
// emission keeps its id, and fixtures need a fixed one.
func WithEventID(id string) PublishOption { return func(p *publishConfig) { p.id = id } }

// WithTime sets x-time instead of now.
func WithTime(t time.Time) PublishOption { return func(p *publishConfig) { p.at = t } }
