package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/beds"
	"github.com/meshbus/mesh/mesh/wire"
	"github.com/meshbus/mesh/observe"
)

// redeliveryWithin bounds the wait for an unacknowledged delivery to come
// again: the consumer's ack wait (30 s by policy) and then some.
const redeliveryWithin = 75 * time.Second

// durability is what a durability scenario published and held back.
type durability struct {
	acked   []observe.Acked
	unacked []observe.Fetched
}

func (s *scenario) bindDurability(sc *godog.ScenarioContext) {
	sc.Step(`^the module "([^"]+)" on "([^"]+)" has emitted (\d+) events "([^"]+)", each acknowledged by JetStream$`, s.hasEmittedMany)
	sc.Step(`^the module "([^"]+)" on "([^"]+)" has fetched (\d+) of them from its consumer without acknowledging them$`, s.hasFetchedMany)
	sc.Step(`^EVENTS holds every event JetStream acknowledged, once each, at contiguous sequences$`, s.everyAckedEventIsHeld)
	sc.Step(`^the (\d+) deliveries left unacknowledged come to the module "([^"]+)" on "([^"]+)" again$`, s.theUnackedComeAgain)
	sc.Step(`^within (\d+) seconds the driver of "([^"]+)" calls "([^".]+)\.([^"]+)" with (\{.*\}) as "([^"]+)" on "([^"]+)" and is answered (\{.*\})$`, s.callsUntilAnswered)
}

// callsUntilAnswered calls a tool until it is answered: a module that lost
// its bus serves again once it has reconnected by itself, and until then a
// call is told, definitely, that nobody serves it.
func (s *scenario) callsUntilAnswered(ctx context.Context, seconds int, impl, module, tool, args, caller, node, answer string) error {
	start := time.Now()
	err := eventually(ctx, time.Duration(seconds)*time.Second, func(ctx context.Context) error {
		if err := s.theDriverCalls(ctx, impl, module, tool, args, caller, node); err != nil {
			return err
		}
		return s.theAnswerIs(answer)
	})
	if err == nil {
		beds.Logf(ctx, "answered %s after the bus came back", time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (s *scenario) moduleJS(ctx context.Context, module, node string) (jetstream.JetStream, error) {
	c, err := s.connect(ctx, wire.ModuleUser(node, module))
	if err != nil {
		return nil, err
	}
	return jetstream.New(c.Conn)
}

func (s *scenario) hasEmittedMany(ctx context.Context, module, node string, n int, key string) error {
	js, err := s.moduleJS(ctx, module, node)
	if err != nil {
		return err
	}
	s.r.tainted = true
	acked, err := observe.Emit(ctx, js, node, module, key, n)
	s.durable.acked = append(s.durable.acked, acked...)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "%d events acknowledged, sequences %d–%d", len(acked), acked[0].Seq, acked[len(acked)-1].Seq)
	return nil
}

func (s *scenario) hasFetchedMany(ctx context.Context, module, node string, n int) error {
	js, err := s.moduleJS(ctx, module, node)
	if err != nil {
		return err
	}
	got, err := observe.Fetch(ctx, js, wire.StreamEvents, wire.ModuleConsumer(node, module), n, 10*time.Second)
	if err != nil {
		return err
	}
	if len(got) != n {
		return fmt.Errorf("expected %d deliveries, got %d", n, len(got))
	}
	s.durable.unacked = got
	return nil
}

func (s *scenario) everyAckedEventIsHeld(ctx context.Context) error {
	if len(s.durable.acked) == 0 {
		return errors.New("no event was acknowledged in this scenario")
	}
	js, err := s.streamJetStream(ctx, wire.StreamEvents)
	if err != nil {
		return err
	}
	got, err := observe.Survive(ctx, js, wire.StreamEvents, s.durable.acked)
	if err != nil {
		return err
	}
	beds.Logf(ctx, "%s", got)
	if !got.OK() {
		return fmt.Errorf("expected every acknowledged event held once at contiguous sequences, got %s", got)
	}
	return nil
}

// theUnackedComeAgain pulls, as a fresh connection of the module, until
// every delivery it held back has come again.
func (s *scenario) theUnackedComeAgain(ctx context.Context, n int, module, node string) error {
	if len(s.durable.unacked) != n {
		return fmt.Errorf("the scenario held back %d deliveries, not %d", len(s.durable.unacked), n)
	}
	want := map[uint64]bool{}
	for _, f := range s.durable.unacked {
		want[f.Seq] = true
	}
	var again []uint64
	err := eventually(ctx, redeliveryWithin, func(ctx context.Context) error {
		js, err := s.moduleJS(ctx, module, node)
		if err != nil {
			return err
		}
		got, err := observe.Fetch(ctx, js, wire.StreamEvents, wire.ModuleConsumer(node, module), n, 2*time.Second)
		if err != nil {
			return err
		}
		for _, f := range got {
			if want[f.Seq] && f.Delivered > 1 && !slices.Contains(again, f.Seq) {
				again = append(again, f.Seq)
			}
		}
		if len(again) < n {
			return fmt.Errorf("expected the %d unacknowledged deliveries again, %d came back", n, len(again))
		}
		return nil
	})
	if err == nil {
		beds.Logf(ctx, "all %d unacknowledged deliveries came again", n)
	}
	return err
}
