// Package natslink is the modules' NATS binding (design 19 on design 25's
// bus): events through JetStream on the module's own subjects and the
// consumer the controller created for it, tools as core request and
// reply with a queue group. It implements link.Transport and decides
// nothing about an envelope: package sdk does.
package natslink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/link"
)

// Bus is one module's NATS connection.
type Bus struct {
	cfg        link.Config
	node, name string
	nc         *nats.Conn
	js         jetstream.JetStream
	denials    *violations
	answers    *answers // kept for callers asking again
	replies    *replies // the calls' replies
	closed     chan struct{}
	log        *slog.Logger

	mu       sync.Mutex
	consumer jetstream.ConsumeContext
}

var _ link.Transport = (*Bus)(nil)

// Dial connects as cfg.Credential with the fingerprint pinned and the
// name checked (link.Dial), on the module's own inbox prefix.
func Dial(ctx context.Context, cfg link.Config) (link.Transport, error) {
	b := &Bus{
		cfg:     cfg,
		node:    cfg.Credential.Node,
		name:    cfg.Credential.Module,
		denials: newViolations(),
		answers: newAnswers(),
		closed:  make(chan struct{}),
		log:     cfg.Logger,
	}
	nc, err := link.Dial(ctx, cfg.Credential,
		link.WithErrorHandler(b.asyncError),
		link.WithNATSOptions(
			nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
			nats.DrainTimeout(cfg.Timeout),
			// A module lives as long as its process: the bus coming back
			// is the only way forward, so it reconnects until Close, as
			// the AMQP binding does, and says so.
			nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					b.log.Warn("connection to the bus lost; reconnecting", "err", err)
				}
			}),
			nats.ReconnectHandler(func(*nats.Conn) { b.log.Info("reconnected to the bus") }),
		),
	)
	if err != nil {
		return nil, err // a pin mismatch is link.ErrFingerprint already
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	b.nc, b.js = nc, js
	b.replies = newReplies(nc)
	return b, nil
}

// asyncError hears what the server says outside any call's reply.
func (b *Bus) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if b.denials.observe(err) {
		return
	}
	attrs := []any{"err", err}
	if sub != nil {
		attrs = append(attrs, "subject", sub.Subject)
	}
	b.log.Error("bus reported an error", attrs...)
}

// Close stops fetching (what was fetched is still handled and settled),
// then drains the connection: tool calls in flight are answered before it
// closes. It waits at most the configured timeout for each. While the bus
// is away there is nothing a drain could settle or answer, so Close stops
// and closes at once; what was delivered and not settled comes again.
func (b *Bus) Close() error {
	b.mu.Lock()
	cc := b.consumer
	b.consumer = nil
	b.mu.Unlock()
	if b.nc.IsReconnecting() {
		if cc != nil {
			cc.Stop()
		}
		b.nc.Close()
		select {
		case <-b.closed:
		case <-time.After(b.cfg.Timeout):
			return fmt.Errorf("close while reconnecting: %w", link.ErrTimeout)
		}
		return nil
	}
	var errs []error
	if cc != nil {
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-time.After(b.cfg.Timeout):
			cc.Stop()
			errs = append(errs, fmt.Errorf("drain consumer: %w", link.ErrTimeout))
		}
	}
	if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("drain connection: %w", err))
	}
	select {
	case <-b.closed:
	case <-time.After(b.cfg.Timeout + time.Second):
		b.nc.Close()
		errs = append(errs, fmt.Errorf("drain connection: %w", link.ErrTimeout))
	}
	return errors.Join(errs...)
}

// mapClosed turns nats.go's closed-connection errors into ErrClosed.
func mapClosed(err error) error {
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) {
		return fmt.Errorf("%w: %w", link.ErrClosed, err)
	}
	return err
}
