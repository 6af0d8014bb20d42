package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/amqplink"
	"github.com/meshbus/mesh/mesh/wire"
)

// aPersonCallsOverTheBus has a person call a tool over the bus the mesh
// is on: on NATS through her client (design 25 §7: the person's client
// speaks NATS alone); on AMQP with her credential for the broker through
// the modules' AMQP binding (mesh.rpc, a direct reply-to), from the test's
// machine through the broker's published port. The answers are kept as
// her client's are.
func (s *scenario) aPersonCallsOverTheBus(ctx context.Context, person, name, args string, times int) error {
	if !s.onAMQP() {
		return s.aPersonCalls(ctx, person, name, args, times)
	}
	module, tool, ok := strings.Cut(name, ".")
	if !ok {
		return fmt.Errorf("%q is not module.tool", name)
	}
	b, err := s.broker()
	if err != nil {
		return err
	}
	cred, err := b.Credential(wire.PersonUser(person))
	if err != nil {
		return err
	}
	addr, err := b.Address(ctx)
	if err != nil {
		return err
	}
	u, err := url.Parse(cred.URL)
	if err != nil {
		return fmt.Errorf("%s's credential: %w", person, err)
	}
	u.Host = addr
	cred.URL = u.String()
	tr, err := amqplink.Dial(ctx, link.Config{Credential: cred, Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second, Context: ctx})
	if err != nil {
		return fmt.Errorf("%s connects to the broker: %w", person, err)
	}
	defer tr.Close()
	s.pp.answers, s.pp.took = nil, nil
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < times; {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := tr.Request(cctx, module, tool, []byte(args))
		cancel()
		// The first call waits for the tool to be served.
		if i == 0 && errors.Is(err, link.ErrNoResponders) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s's call %d of %s over AMQP: %w", person, i+1, name, err)
		}
		if e := wire.HeaderValue(out.Header, wire.HeaderToolError); e != "" {
			return fmt.Errorf("%s's call %d of %s over AMQP: the tool failed: %s", person, i+1, name, e)
		}
		s.pp.took = append(s.pp.took, time.Since(start))
		s.pp.answers = append(s.pp.answers, out.Body)
		i++
	}
	return nil
}
