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

// A person's calls on AMQP. The person's client speaks NATS alone (design
// 25 §7), so on a mesh on the broker a person calls with her credential
// for the broker through the modules' AMQP binding (mesh.rpc, a direct
// reply-to), from the test's machine through the broker's published port,
// as a predecessor's tool would.

// aPersonCallsOverTheBus has a person call a tool over the bus the mesh
// is on: on NATS through her client, on AMQP through the broker. The
// answers and their times are kept as her client's are.
func (s *scenario) aPersonCallsOverTheBus(ctx context.Context, person, name, args string, times int) error {
	if !s.onAMQP() {
		return s.aPersonCalls(ctx, person, name, args, times)
	}
	tr, err := s.personOnAMQP(ctx, person)
	if err != nil {
		return err
	}
	call := func(ctx context.Context) ([]byte, error) { return callOverAMQP(ctx, tr, name, []byte(args)) }
	served := func(ctx context.Context) ([]byte, error) { return callServedOverAMQP(ctx, tr, name, []byte(args)) }
	return s.timePersonCalls(ctx, person+"'s", name+" over AMQP", times, served, call)
}

// personOnAMQP is person's connection to the broker, opened once per
// scenario with her credential from the broker's side of the mesh.
func (s *scenario) personOnAMQP(ctx context.Context, person string) (link.Transport, error) {
	if tr, ok := s.pp.onAMQP[person]; ok {
		return tr, nil
	}
	b, err := s.broker()
	if err != nil {
		return nil, err
	}
	cred, err := b.Credential(wire.PersonUser(person))
	if err != nil {
		return nil, err
	}
	addr, err := b.Address(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cred.URL)
	if err != nil {
		return nil, fmt.Errorf("%s's credential: %w", person, err)
	}
	u.Host = addr
	cred.URL = u.String()
	tr, err := amqplink.Dial(ctx, link.Config{Credential: cred, Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second, Context: context.WithoutCancel(ctx)})
	if err != nil {
		return nil, fmt.Errorf("%s connects to the broker: %w", person, err)
	}
	if s.pp.onAMQP == nil {
		s.pp.onAMQP = map[string]link.Transport{}
	}
	s.pp.onAMQP[person] = tr
	s.cleanups = append(s.cleanups, func() { tr.Close() })
	return tr, nil
}

// callOverAMQP calls name ("module.tool") once, within a minute (a relay
// asked for many calls answers after all of them).
func callOverAMQP(ctx context.Context, tr link.Transport, name string, args []byte) ([]byte, error) {
	module, tool, ok := strings.Cut(name, ".")
	if !ok {
		return nil, fmt.Errorf("%q is not module.tool", name)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := tr.Request(ctx, module, tool, args)
	if err != nil {
		return nil, err
	}
	if e := wire.HeaderValue(out.Header, wire.HeaderToolError); e != "" {
		return nil, fmt.Errorf("the tool failed: %s", e)
	}
	return out.Body, nil
}

// callServedOverAMQP is callServed on the broker: it asks again while
// nobody serves the tool yet, for up to 20 s.
func callServedOverAMQP(ctx context.Context, tr link.Transport, name string, args []byte) ([]byte, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := callOverAMQP(ctx, tr, name, args)
		if !errors.Is(err, link.ErrNoResponders) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling, bounded by the deadline
		}
	}
}
