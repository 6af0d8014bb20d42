package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// connectProbes is how many probes connectTime takes the median of.
const connectProbes = 5

// connectTime is the median time of a TCP handshake with the bus from the
// private network, over connectProbes probes.
func connectTime(t *testing.T, ctx context.Context, c *Cluster) time.Duration {
	t.Helper()
	var ms []float64
	for range connectProbes {
		r, err := c.Probe(ctx, Private, "tcp", AliasNATS+":4222")
		if err != nil || !r.OK || r.ConnectMS <= 0 {
			t.Fatalf("expected the bus reached from private with the connect timed, got %+v, %v", r, err)
		}
		ms = append(ms, r.ConnectMS)
	}
	slices.Sort(ms)
	return time.Duration(ms[len(ms)/2] * float64(time.Millisecond)).Round(10 * time.Microsecond)
}

// TestFaults applies every fault the bus can take to a real nats container
// and checks each from outside: while it is in effect the bus does not
// answer (or, cut off the outside network, is not reached from there; or,
// its link delayed, answers that much later); once undone it answers
// again, as soon as before. The times are logged.
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
	// A link holding every packet out for 200ms: a connection's handshake
	// from that network (the bus's SYN-ACK is held) takes about that much
	// longer while it lasts, and no longer once it is undone. The kernel's
	// netem does it where there is one; mesh-delay (NFQUEUE) elsewhere.
	t.Run("delay", func(t *testing.T) {
		const delay = 200 * time.Millisecond
		before := connectTime(t, ctx, c)
		injected, err := c.Inject(ctx, MemberBus, "delay 200ms on private")
		if err != nil {
			t.Fatal(err)
		}
		during := connectTime(t, ctx, c)
		undone, err := c.Undo(ctx, MemberBus)
		if err != nil {
			t.Fatal(err)
		}
		after := connectTime(t, ctx, c)
		t.Logf("delay: connect from private, median of %d: %s before, %s delayed, %s after; injected in %s, undone in %s",
			connectProbes, before, during, after, injected.Round(time.Millisecond), undone.Round(time.Millisecond))
		if grew := during - before; grew < delay*8/10 || grew > delay*3/2 {
			t.Errorf("expected the connect to take about %s longer while delayed, it took %s longer", delay, grew)
		}
		if after-before > delay/4 {
			t.Errorf("expected the connect back to about %s once undone, it takes %s", before, after)
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
