package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// answers reports whether the bus serves a client: a connection whose
// round trip completes within a second.
func answers(ctx context.Context, c *Cluster) error {
	addr, err := c.BusAddress(ctx)
	if err != nil {
		return err
	}
	nc, err := natsgo.Connect("nats://"+addr, natsgo.Timeout(time.Second), natsgo.UserInfo("t", "pw"), natsgo.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.FlushTimeout(time.Second)
}

// TestFaults applies every fault the bus can take to a real nats container
// and checks each from outside: while it is in effect the bus does not
// answer (or, cut off the outside network, is not reached from there);
// once undone it answers again. The times are logged.
func TestFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	_, c := natsAlone(t, ctx)
	if err := answers(ctx, c); err != nil {
		t.Fatalf("before any fault: %v", err)
	}
	for _, name := range []string{"pause", "partition from outside", "kill-server", "kill", "stop"} {
		t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
			injected, err := c.Inject(ctx, MemberBus, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Fault(MemberBus); got != name {
				t.Fatalf("expected %q in effect, got %q", name, got)
			}
			if name == "partition from outside" {
				if r, err := c.Probe(ctx, Outside, "tcp", AliasNATSOutside+":4222"); err != nil || r.OK {
					t.Fatalf("expected the bus out of reach from outside, got %+v, %v", r, err)
				}
			} else if err := answers(ctx, c); err == nil {
				t.Fatalf("expected the bus not to answer while %s is in effect", name)
			}
			undone, err := c.Undo(ctx, MemberBus)
			if err != nil {
				t.Fatal(err)
			}
			if name == "partition from outside" {
				if r, err := c.Probe(ctx, Outside, "tcp", AliasNATSOutside+":4222"); err != nil || !r.OK {
					t.Fatalf("expected the bus reached from outside again, got %+v, %v", r, err)
				}
			}
			if err := answers(ctx, c); err != nil {
				t.Fatalf("expected the bus to answer once %s is undone: %v", name, err)
			}
			t.Logf("%s: injected in %s, undone in %s", name, injected.Round(time.Millisecond), undone.Round(time.Millisecond))
		})
	}

	// A link losing every packet: the bus is not reached on that network
	// (the probe runs there); healed, it is.
	t.Run("loss", func(t *testing.T) {
		injected, err := c.Inject(ctx, MemberBus, "loss 100% on private")
		if err != nil {
			t.Fatal(err)
		}
		if r, err := c.Probe(ctx, Private, "tcp", AliasNATS+":4222"); err != nil || r.OK {
			t.Fatalf("expected the bus out of reach on a link losing every packet, got %+v, %v", r, err)
		}
		undone, err := c.Undo(ctx, MemberBus)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := c.Probe(ctx, Private, "tcp", AliasNATS+":4222"); err != nil || !r.OK {
			t.Fatalf("expected the bus reached once the link is healed, got %+v, %v", r, err)
		}
		t.Logf("loss: injected in %s, undone in %s", injected.Round(time.Millisecond), undone.Round(time.Millisecond))
	})
	// Delay needs the kernel's netem; where it is missing the fault says
	// so and applies nothing.
	t.Run("delay", func(t *testing.T) {
		_, err := c.Inject(ctx, MemberBus, "delay 200ms on private")
		if errors.Is(err, ErrFaultUnavailable) {
			if c.Fault(MemberBus) != "" || !strings.Contains(err.Error(), "sch_netem") {
				t.Fatalf("an unavailable fault must apply nothing and say why, got %q in effect, %v", c.Fault(MemberBus), err)
			}
			t.Skipf("delay is not available on this machine: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Undo(ctx, MemberBus); err != nil {
			t.Fatal(err)
		}
	})
	for _, bad := range []string{"loss 0% on private", "loss 30 on private", "delay forever on private", "loss 10% on elsewhere"} {
		if _, err := c.Inject(ctx, MemberBus, bad); !errors.Is(err, ErrUnknownFault) {
			t.Errorf("%q: expected ErrUnknownFault, got %v", bad, err)
		}
	}

	if _, err := c.Inject(ctx, "store", "kill"); !errors.Is(err, ErrUnknownMember) || !strings.Contains(err.Error(), "bus") {
		t.Errorf("an unknown member: expected ErrUnknownMember listing the members, got %v", err)
	}
	if _, err := c.Inject(ctx, MemberBus, "melt"); !errors.Is(err, ErrUnknownFault) || !strings.Contains(err.Error(), "kill-server") {
		t.Errorf("an unknown fault: expected ErrUnknownFault listing the faults, got %v", err)
	}
	if _, err := c.Undo(ctx, MemberBus); !errors.Is(err, ErrNoFault) {
		t.Errorf("undo with nothing applied: expected ErrNoFault, got %v", err)
	}
	if _, err := c.Inject(ctx, MemberBus, "pause"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inject(ctx, MemberBus, "stop"); !errors.Is(err, ErrFaultActive) {
		t.Errorf("a second fault on one member: expected ErrFaultActive, got %v", err)
	}
	if err := c.UndoAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := answers(ctx, c); err != nil {
		t.Fatal(fmt.Errorf("after UndoAll: %w", err))
	}
}
