package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// The control plane of a mesh on AMQP, as the steps read it from outside
// (docs/decisions/0009; observe/amqpcontrol.go): what CONTROL holds is
// the control queues' own counts; what was handed to the controller, and
// what reached the broker, is the broker's firehose, which keeps what it
// copies from the moment a scenario first watches it until its end; a
// node's declaration is node.<node>, read and given back as the host
// reads it, with the controller's credential.

// amqpControl is the scenario's watch on the control plane on AMQP.
type amqpControl struct {
	trace *observe.AMQPTrace
	// controller is a connection as the controller, for node.<node>.
	controller *observe.AMQPClient
}

// broker is the AMQP broker the scenario's mesh is on.
func (s *scenario) broker() (harness.AMQPBroker, error) {
	r, err := s.cluster()
	if err != nil {
		return nil, err
	}
	if r.amqp == nil {
		return nil, errors.New("the mesh is on AMQP and no broker was handed over")
	}
	return r.amqp, nil
}

// controlTrace is the control plane's firehose as the scenario watches
// it, watched from the first call on; it stops at the scenario's end.
func (s *scenario) controlTrace(ctx context.Context) (*observe.AMQPTrace, error) {
	if t := s.ac.trace; t != nil {
		return t, t.Alive()
	}
	b, err := s.broker()
	if err != nil {
		return nil, err
	}
	t, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	s.ac.trace = t
	s.cleanups = append(s.cleanups, func() {
		if err := t.Close(); err != nil {
			beds.Logf(ctx, "teardown: %v", err)
		}
	})
	return t, nil
}

// controlQueues are the control plane's queues with what each holds, as
// the broker counts them.
func (s *scenario) controlQueues(ctx context.Context) (map[string]observe.AMQPQueue, error) {
	b, err := s.broker()
	if err != nil {
		return nil, err
	}
	body, err := b.ListQueues(ctx, wire.AMQPControlVhost, observe.AMQPQueuesColumns...)
	if err != nil {
		return nil, err
	}
	return observe.AMQPQueues(body)
}

// heldOnAMQP is what subject's control queue holds.
func (s *scenario) heldOnAMQP(ctx context.Context, subject string) (observe.AMQPQueue, error) {
	q, err := wire.ControlQueue(subject)
	if err != nil {
		return observe.AMQPQueue{}, err
	}
	qs, err := s.controlQueues(ctx)
	if err != nil {
		return observe.AMQPQueue{}, err
	}
	held, ok := qs[q]
	if !ok {
		return observe.AMQPQueue{}, fmt.Errorf("the broker has no queue %s in %s", q, wire.AMQPControlVhost)
	}
	return held, nil
}

// controllerOnAMQP is a connection as the controller, on its credential
// as the store keeps it, dialled once per scenario.
func (s *scenario) controllerOnAMQP(ctx context.Context) (*observe.AMQPClient, error) {
	if c := s.ac.controller; c != nil && !c.IsClosed() {
		return c, nil
	}
	b, err := s.broker()
	if err != nil {
		return nil, err
	}
	cred, err := b.Credential(wire.ControllerUser)
	if err != nil {
		return nil, err
	}
	addr, err := b.Address(ctx)
	if err != nil {
		return nil, err
	}
	c, err := observe.DialAMQP(ctx, cred, addr)
	if err != nil {
		return nil, err
	}
	s.ac.controller = c
	s.cleanups = append(s.cleanups, func() { _ = c.Close() })
	return c, nil
}

// declarationRead bounds a reading of node.<node>: its host reads it and
// gives it back every few seconds, and a reading meanwhile finds it
// empty.
const declarationRead = 10 * time.Second

// newestOnAMQP is what node.<node> holds.
func (s *scenario) newestOnAMQP(ctx context.Context, node string) (observe.SignedDeclaration, error) {
	c, err := s.controllerOnAMQP(ctx)
	if err != nil {
		return observe.SignedDeclaration{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, declarationRead)
	defer cancel()
	return c.NewestDeclaration(ctx, node)
}

// noteHandedOnAMQP marks the control plane's firehose, watched from here
// on if it was not yet: what the controller is handed is counted from
// the mark.
func (s *scenario) noteHandedOnAMQP(ctx context.Context) error {
	t, err := s.controlTrace(ctx)
	if err != nil {
		return err
	}
	s.ro.heldMark = t.Mark()
	return nil
}

// noted is the firehose as a noting step left it: an AMQP step that
// counts from a mark needs one that set it.
func (s *scenario) noted() (*observe.AMQPTrace, error) {
	if s.ac.trace == nil {
		return nil, errors.New("the control plane's firehose was not watched before this step: no earlier step noted what the controller was handed, or paused it")
	}
	return s.ac.trace, s.ac.trace.Alive()
}

// heldOnAMQPFor: the controller, its store away, holds the message on
// subject and gives it back after a delay, again and again: the
// subject's queue handed it over at least times since the mark (the
// broker's firehose counts each handing), and still holds it, as the
// broker counts it.
func (s *scenario) heldOnAMQPFor(ctx context.Context, seconds, times int, subject string) error {
	t, err := s.noted()
	if err != nil {
		return err
	}
	q, err := wire.ControlQueue(subject)
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		if err := t.Alive(); err != nil {
			return err
		}
		handed := t.Delivered(q, s.ro.heldMark)
		held, err := s.heldOnAMQP(ctx, subject)
		if err != nil {
			return err
		}
		if handed < times || held.Messages != 1 {
			return fmt.Errorf("expected the message on %s handed to the controller %d times more and still in %s; handed %d times more, %s holds %d (%d ready, %d unsettled)",
				subject, times, q, handed, q, held.Messages, held.Ready, held.Unacked)
		}
		beds.Logf(ctx, "the message on %s was handed to the controller %d times while the store was away", subject, handed)
		return nil
	})
}

// reportsMadeWhileCutOffOnAMQP: the reports node made while it could not
// reach the broker reached it once it could, into the node's report
// queue (the firehose saw them routed there, their times inside the cut),
// and the queue holds at least as many (the controller is paused, so none
// is settled yet).
func (s *scenario) reportsMadeWhileCutOffOnAMQP(ctx context.Context, seconds, atLeast int, node string) error {
	t, err := s.noted()
	if err != nil {
		return err
	}
	return eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		if err := t.Alive(); err != nil {
			return err
		}
		reports, err := observe.TracedReports(t, node)
		if err != nil {
			return err
		}
		n := 0
		for _, r := range reports {
			if !r.At.Before(s.brokenFrom) && !r.At.After(s.brokenUntil) {
				n++
			}
		}
		held, err := s.heldOnAMQP(ctx, wire.NodeReport(node))
		if err != nil {
			return err
		}
		if n < atLeast || held.Messages < n {
			return fmt.Errorf("expected at least %d reports of %s made between %s and %s to reach its report queue and stay there; %d of the %d it was sent did, and it holds %d",
				atLeast, node, s.brokenFrom.Format(time.RFC3339), s.brokenUntil.Format(time.RFC3339), n, len(reports), held.Messages)
		}
		beds.Logf(ctx, "%d reports of %s made while it was cut off reached its report queue", n, node)
		return nil
	})
}

// controlSettledOnAMQP: every queue holding CONTROL's subjects holds
// nothing, ready or handed over and unsettled, as the broker counts it.
func (s *scenario) controlSettledOnAMQP(ctx context.Context) error {
	qs, err := s.controlQueues(ctx)
	if err != nil {
		return err
	}
	held := observe.HeldInControl(qs)
	if len(held) == 0 {
		return fmt.Errorf("expected the broker to have CONTROL's queues in %s, it lists %d queues, none of them", wire.AMQPControlVhost, len(qs))
	}
	var left []string
	for _, q := range held {
		if q.Messages != 0 {
			left = append(left, fmt.Sprintf("%s holds %d (%d ready, %d unsettled)", q.Name, q.Messages, q.Ready, q.Unacked))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("expected CONTROL's queues settled and empty: %s", strings.Join(left, "; "))
	}
	return nil
}
