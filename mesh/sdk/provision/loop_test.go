package provision

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Every time-based rule is driven inside a synctest bubble: time.Sleep
// advances the bubble's fake clock at once, and time.Now reads it.

var (
	billing = Consumer{Module: "billing", Node: "node-a"}
	ledger  = Consumer{Module: "ledger", Node: "node-a"}
)

func unreachable() error {
	return WithClass(wire.ClassUnreachable, errors.New("dial tcp 10.0.0.5:5432: connection refused"))
}

func TestFailingAfterFiveMinutesThenEveryFifteen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing)
		b.prov.setFail(billing, unreachable())
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- b.loop.Run(ctx) }()
		at := func(d time.Duration) {
			time.Sleep(time.Until(start.Add(d)))
			synctest.Wait()
		}
		failing := func() []wire.FailingEvent {
			return bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)
		}
		recovered := func() []wire.RecoveredEvent {
			return bodies[wire.RecoveredEvent](t, b.pub, wire.EventProvisionerRecovered)
		}

		at(5*time.Minute - time.Second)
		if n := len(failing()); n != 0 {
			t.Fatalf("expected no provisioner.failing before five minutes, got %d", n)
		}
		at(5*time.Minute + time.Second)
		f := failing()
		if len(f) != 1 {
			t.Fatalf("expected one provisioner.failing after five minutes, got %d", len(f))
		}
		want := wire.FailingEvent{ConsumerRef: wire.ConsumerRef{Consumer: "billing", Node: "node-a"},
			Class: wire.ClassUnreachable, Since: start.UTC()}
		if f[0] != want {
			t.Errorf("expected %+v, got %+v", want, f[0])
		}
		at(20*time.Minute - time.Second)
		if n := len(failing()); n != 1 {
			t.Fatalf("expected still one provisioner.failing before twenty minutes, got %d", n)
		}
		at(20*time.Minute + time.Second)
		if f := failing(); len(f) != 2 || f[1] != want {
			t.Fatalf("expected a second provisioner.failing %+v fifteen minutes later, got %+v", want, f)
		}
		if n := len(recovered()); n != 0 {
			t.Fatalf("expected no provisioner.recovered while failing, got %d", n)
		}

		b.prov.setFail(billing, nil)
		at(20*time.Minute + 31*time.Second)
		r := recovered()
		if len(r) != 1 || r[0].Consumer != "billing" || r[0].Node != "node-a" || r[0].Reason != wire.RecoveredSuccess {
			t.Fatalf("expected one provisioner.recovered (success) for billing on node-a, got %+v", r)
		}
		at(2 * time.Hour)
		if n, m := len(failing()), len(recovered()); n != 2 || m != 1 {
			t.Fatalf("expected nothing more once recovered, got %d failing and %d recovered", n, m)
		}

		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("expected Run to end with context.Canceled, got %v", err)
		}
	})
}

func TestFailingNeedsFiveMinutesWithoutOneSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing)
		b.prov.setFail(billing, unreachable())
		b.pass()
		b.passes(6, 30*time.Second) // 0:00 … 3:00 failing
		b.prov.setFail(billing, nil)
		b.passes(1, 30*time.Second) // 3:30 a success
		b.prov.setFail(billing, WithClass(wire.ClassSecret, errors.New("read secret: forbidden")))
		b.passes(1, 30*time.Second) // 4:00 failing again
		failingSince := time.Now()
		b.passes(9, 30*time.Second) // 8:30: more than five minutes since 0:00, less since 4:00
		if f := bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing); len(f) != 0 {
			t.Fatalf("expected a success to restart the five minutes, got %+v", f)
		}
		b.passes(1, 30*time.Second) // 9:00
		f := bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)
		if len(f) != 1 || f[0].Class != wire.ClassSecret || !f[0].Since.Equal(failingSince) {
			t.Fatalf("expected one failing (secret, since %s), got %+v", failingSince, f)
		}
		// The first success of the process was its only recovered so far.
		r := bodies[wire.RecoveredEvent](t, b.pub, wire.EventProvisionerRecovered)
		if len(r) != 1 || r[0].Reason != wire.RecoveredRestart {
			t.Fatalf("expected one recovered (restart) from the first success, got %+v", r)
		}
	})
}

func TestRecoveredOnWithdrawal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing, ledger)
		b.pass() // made, so still held once withdrawn
		b.prov.setFail(billing, unreachable())
		b.passes(11, 30*time.Second)
		if n := len(bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)); n != 1 {
			t.Fatalf("expected one failing, got %d", n)
		}
		b.ask(ledger)
		b.passes(1, 30*time.Second)
		var withdrawn []wire.RecoveredEvent
		for _, r := range bodies[wire.RecoveredEvent](t, b.pub, wire.EventProvisionerRecovered) {
			if r.Consumer == "billing" && r.Reason != wire.RecoveredRestart {
				withdrawn = append(withdrawn, r)
			}
		}
		if len(withdrawn) != 1 || withdrawn[0].Reason != wire.RecoveredWithdrawn {
			t.Fatalf("expected one recovered (withdrawn) for billing, got %+v", withdrawn)
		}
		b.passes(60, 30*time.Second)
		if n := len(bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)); n != 1 {
			t.Fatalf("expected no failing for a withdrawn consumer, got %d in all", n)
		}
	})
}

func TestRecoveredOnFirstSuccessAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing)
		b.prov.setFail(billing, unreachable())
		b.pass()
		b.passes(12, 30*time.Second)
		if n := len(bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)); n != 1 {
			t.Fatalf("expected one failing before the restart, got %d", n)
		}
		// The provider restarts, and the backend is back.
		b.loop = b.newLoop()
		b.prov.setFail(billing, nil)
		b.pass()
		r := bodies[wire.RecoveredEvent](t, b.pub, wire.EventProvisionerRecovered)
		if len(r) != 1 || r[0].Consumer != "billing" || r[0].Reason != wire.RecoveredRestart {
			t.Fatalf("expected one recovered (restart) for billing, got %+v", r)
		}
		b.passes(20, 30*time.Second)
		if n := len(bodies[wire.RecoveredEvent](t, b.pub, wire.EventProvisionerRecovered)); n != 1 {
			t.Fatalf("expected only the first success to say recovered, got %d", n)
		}
	})
}

func TestUnaskedFivePassesButNotTenMinutesIsNotRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		gone := all[7]
		b.ask(all[:7]...)
		b.passes(5, 30*time.Second) // five readings, two minutes
		if b.prov.count("disable") != 0 || b.consumerState(gone) != wire.ConsumerActive {
			t.Fatalf("expected %s kept active after five passes in two minutes", gone.Module)
		}
		st := b.status()
		if st.Unasked == nil || st.Unasked.Passes != 5 || st.Unasked.State != wire.SetCounting {
			t.Fatalf("expected the set counting at five passes, got %+v", st.Unasked)
		}
		since := st.Unasked.Since
		b.passes(15, 30*time.Second) // 9:30 since the first reading that missed it
		if b.prov.count("disable") != 0 {
			t.Fatal("expected no retirement before ten minutes")
		}
		b.passes(1, 30*time.Second) // 10:00
		if in, _ := b.prov.inst(gone); !in.disabled || in.mark == nil {
			t.Fatalf("expected %s disabled and marked after ten minutes, got %+v", gone.Module, in)
		}
		if b.consumerState(gone) != wire.ConsumerRetired {
			t.Fatalf("expected %s retired", gone.Module)
		}
		ev := b.retirements(wire.RetirementRetired)
		if len(ev) != 1 || len(ev[0].Consumers) != 1 || ev[0].Consumers[0].Consumer != gone.Module || ev[0].AccessKept {
			t.Fatalf("expected one provisioner.retirement (retired) of %s, got %+v", gone.Module, ev)
		}
		if in, _ := b.prov.inst(gone); !strings.Contains(in.mark.Why, since.Format(time.RFC3339)) {
			t.Errorf("expected the mark to say since when, got %q", in.mark.Why)
		}
		b.passes(40, 30*time.Second)
		if n := b.prov.count("disable"); n != 1 {
			t.Fatalf("expected one retirement in all, got %d disables", n)
		}
		if b.prov.count("delete") != 0 {
			t.Fatal("expected nothing deleted by the loop")
		}
	})
}

func TestUnaskedTenMinutesButFourPassesIsNotRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		b.ask(all[:7]...)
		b.passes(1, time.Minute)   // the first reading missing app-8
		b.passes(3, 4*time.Minute) // four readings over twelve minutes
		if b.prov.count("disable") != 0 {
			t.Fatal("expected no retirement after four passes, however long")
		}
		b.passes(1, 4*time.Minute) // the fifth
		if b.prov.count("disable") != 1 || b.consumerState(all[7]) != wire.ConsumerRetired {
			t.Fatal("expected app-8 retired at the fifth pass")
		}
	})
}

func TestChangedSetStartsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		b.ask(all[:7]...)
		b.passes(4, 3*time.Minute) // app-8 unasked four readings, nine minutes
		b.ask(all[:6]...)          // app-7 goes too: another set
		b.passes(4, 3*time.Minute) // the old set would have been due long ago
		if b.prov.count("disable") != 0 {
			t.Fatal("expected a changed set to count afresh")
		}
		st := b.status()
		if st.Unasked == nil || len(st.Unasked.Consumers) != 2 || st.Unasked.Passes != 4 {
			t.Fatalf("expected the set of two at four passes, got %+v", st.Unasked)
		}
		b.passes(1, 3*time.Minute)
		if b.prov.count("disable") != 2 {
			t.Fatalf("expected both retired at the new set's fifth pass, got %d disables", b.prov.count("disable"))
		}
	})
}

func TestUnreadableFileDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		b.ask(all[:7]...)
		b.passes(4, 30*time.Second)
		if err := os.WriteFile(b.path, []byte(`[{"as": "app-1"}]`), 0o600); err != nil {
			t.Fatal(err)
		}
		checks := b.prov.count("check")
		for range 30 {
			time.Sleep(30 * time.Second)
			err := b.loop.Pass(t.Context())
			if !errors.Is(err, wire.ErrBadContributions) || !strings.Contains(err.Error(), "field node is missing") {
				t.Fatalf("expected the pass to name the bad field, got %v", err)
			}
		}
		if n := b.prov.count("check") - checks; n != 30*7 {
			t.Errorf("expected the last good reading checked on every pass (%d checks), got %d", 30*7, n)
		}
		if st := b.status(); b.prov.count("disable") != 0 || st.Unasked == nil || st.Unasked.Passes != 4 {
			t.Fatalf("expected unreadable passes neither to count nor to retire, got %+v", st.Unasked)
		}
		b.ask(all[:7]...)
		b.passes(1, 30*time.Second)
		if b.prov.count("disable") != 1 {
			t.Fatal("expected the fifth good reading, long after ten minutes, to retire app-8")
		}
	})
}

func TestMissingFileIsNotAnEmptyReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing)
		b.pass()
		if err := os.Remove(b.path); err != nil {
			t.Fatal(err)
		}
		for range 40 {
			time.Sleep(30 * time.Second)
			if err := b.loop.Pass(t.Context()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("expected the pass to report the missing file, got %v", err)
			}
		}
		if b.prov.count("disable") != 0 || b.consumerState(billing) != wire.ConsumerActive {
			t.Fatal("expected a missing file to retire nothing")
		}
	})
}

func TestLargeSetWaitsForPersonThenApproved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(10)
		b.ask(all...)
		b.pass()
		b.ask(all[:6]...) // four unasked: more than three, not more than half of ten
		b.passes(21, 30*time.Second)
		if b.prov.count("disable") != 0 {
			t.Fatal("expected a set of four not to be retired without a person")
		}
		pend := b.retirements(wire.RetirementPending)
		if len(pend) != 1 || len(pend[0].Consumers) != 4 || !strings.Contains(pend[0].Why, "more than 3") {
			t.Fatalf("expected one provisioner.retirement (pending) of four, more than three, got %+v", pend)
		}
		st := b.status()
		if st.Unasked == nil || st.Unasked.State != wire.SetPending || st.Unasked.Set != pend[0].Set {
			t.Fatalf("expected the status to show set %s pending, got %+v", pend[0].Set, st.Unasked)
		}
		b.passes(60, 30*time.Second)
		if n := len(b.retirements(wire.RetirementPending)); n != 1 || b.prov.count("disable") != 0 {
			t.Fatalf("expected the set to keep waiting quietly, got %d pending events", n)
		}

		_, err := b.loop.Approve(t.Context(), []byte(`{"set": "000000000000"}`))
		if !errors.Is(err, ErrNoSuchSet) {
			t.Fatalf("expected another set's approval refused with ErrNoSuchSet, got %v", err)
		}
		out, err := b.loop.Approve(t.Context(), []byte(`{"set": "`+pend[0].Set+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		res := decode[wire.ApproveResult](t, out)
		if len(res.Retired) != 4 || len(res.Failed) != 0 || b.prov.count("disable") != 4 {
			t.Fatalf("expected four retired, got %+v and %d disables", res, b.prov.count("disable"))
		}
		for _, c := range all[6:] {
			if b.consumerState(c) != wire.ConsumerRetired {
				t.Errorf("expected %s retired", c.Module)
			}
		}
		ret := b.retirements(wire.RetirementRetired)
		if len(ret) != 1 || len(ret[0].Consumers) != 4 || !strings.Contains(ret[0].Why, "approved by a person") {
			t.Fatalf("expected one provisioner.retirement (retired) of four, approved, got %+v", ret)
		}
		b.passes(10, 30*time.Second)
		if st := b.status(); st.Unasked != nil {
			t.Fatalf("expected nothing unasked once retired, got %+v", st.Unasked)
		}
	})
}

func TestMoreThanHalfWaitsForPersonThenRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(4)
		b.ask(all...)
		b.pass()
		b.ask(all[0]) // three of four unasked: more than half
		b.passes(21, 30*time.Second)
		pend := b.retirements(wire.RetirementPending)
		if len(pend) != 1 || !strings.Contains(pend[0].Why, "more than half") {
			t.Fatalf("expected one pending, more than half, got %+v", pend)
		}
		out, err := b.loop.Reject(t.Context(), []byte(`{"set": "`+pend[0].Set+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res := decode[wire.RejectResult](t, out); len(res.Kept) != 3 {
			t.Fatalf("expected three kept, got %+v", res)
		}
		if n := len(b.retirements(wire.RetirementRejected)); n != 1 {
			t.Fatalf("expected one provisioner.retirement (rejected), got %d", n)
		}
		b.passes(120, 30*time.Second)
		if b.prov.count("disable") != 0 || len(b.retirements(wire.RetirementPending)) != 1 {
			t.Fatal("expected a rejected set kept active and not put forward again")
		}
		if st := b.status(); st.Unasked == nil || st.Unasked.State != wire.SetRejected {
			t.Fatalf("expected the status to show the set rejected, got %+v", st.Unasked)
		}
		if _, err := b.loop.Approve(t.Context(), []byte(`{"set": "`+pend[0].Set+`"}`)); !errors.Is(err, ErrNoSuchSet) {
			t.Fatalf("expected a rejected set not to be approvable, got %v", err)
		}

		// One is asked for again: two of four unasked is another set, and
		// neither more than three nor more than half.
		b.ask(all[0], all[1])
		b.passes(21, 30*time.Second)
		if b.prov.count("disable") != 2 {
			t.Fatalf("expected the new set of two retired without a person, got %d disables", b.prov.count("disable"))
		}
	})
}

func TestPendingSetThatChangesIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(10)
		b.ask(all...)
		b.pass()
		b.ask(all[:6]...)
		b.passes(21, 30*time.Second)
		pend := b.retirements(wire.RetirementPending)
		if len(pend) != 1 {
			t.Fatalf("expected one pending, got %+v", pend)
		}
		b.ask(all[:7]...)
		b.passes(1, 30*time.Second)
		c := b.retirements(wire.RetirementCancelled)
		if len(c) != 1 || c[0].Set != pend[0].Set {
			t.Fatalf("expected the pending set cancelled, got %+v", c)
		}
		if _, err := b.loop.Approve(t.Context(), []byte(`{"set": "`+pend[0].Set+`"}`)); !errors.Is(err, ErrNoSuchSet) {
			t.Fatalf("expected the changed set's approval refused, got %v", err)
		}
	})
}

func TestDeleteOnlyRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		gone := all[7]
		args := []byte(`{"consumer": "app-8", "node": "node-a"}`)
		if _, err := b.loop.Delete(t.Context(), args); !errors.Is(err, ErrNotRetired) {
			t.Fatalf("expected deleting an active consumer refused with ErrNotRetired, got %v", err)
		}
		if _, err := b.loop.Delete(t.Context(), []byte(`{"consumer": "nobody", "node": "node-a"}`)); !errors.Is(err, ErrUnknownConsumer) {
			t.Fatalf("expected deleting an unknown consumer refused, got %v", err)
		}
		b.ask(all[:7]...)
		b.passes(21, 30*time.Second)
		if b.consumerState(gone) != wire.ConsumerRetired {
			t.Fatal("expected app-8 retired")
		}
		if b.prov.count("delete") != 0 {
			t.Fatal("expected the loop itself never to delete")
		}
		out, err := b.loop.Delete(t.Context(), args)
		if err != nil {
			t.Fatal(err)
		}
		if res := decode[wire.DeleteResult](t, out); res.State != wire.ConsumerDeleted || res.Consumer != "app-8" {
			t.Fatalf("expected app-8 deleted, got %+v", res)
		}
		if _, held := b.prov.inst(gone); held || b.prov.count("delete") != 1 {
			t.Fatal("expected the backend to have deleted app-8")
		}
		if b.consumerState(gone) != wire.ConsumerDeleted {
			t.Fatal("expected app-8 no longer listed")
		}
		if d := b.retirements(wire.RetirementDeleted); len(d) != 1 || d[0].Consumers[0].Consumer != "app-8" {
			t.Fatalf("expected one provisioner.retirement (deleted), got %+v", d)
		}
	})
}

func TestAskedAgainReenables(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		gone := all[7]
		b.ask(all[:7]...)
		b.passes(21, 30*time.Second)
		if in, _ := b.prov.inst(gone); !in.disabled {
			t.Fatal("expected app-8 disabled")
		}
		b.ask(all...)
		b.passes(1, 30*time.Second)
		if in, _ := b.prov.inst(gone); in.disabled || in.mark != nil {
			t.Fatalf("expected the ordinary create to re-enable app-8 and clear its mark, got %+v", in)
		}
		if b.consumerState(gone) != wire.ConsumerActive {
			t.Fatal("expected app-8 active again")
		}
		if r := b.retirements(wire.RetirementReenabled); len(r) != 1 || r[0].Consumers[0].Consumer != "app-8" {
			t.Fatalf("expected one provisioner.retirement (reenabled), got %+v", r)
		}
		if _, err := b.loop.Delete(t.Context(), []byte(`{"consumer": "app-8", "node": "node-a"}`)); !errors.Is(err, ErrNotRetired) {
			t.Fatalf("expected a re-enabled consumer not deletable, got %v", err)
		}
	})
}

func TestProviderWithoutDisableOnlyMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.prov.noDisable = true
		all := consumers(8)
		b.ask(all...)
		b.pass()
		gone := all[7]
		b.ask(all[:7]...)
		b.passes(21, 30*time.Second)
		in, held := b.prov.inst(gone)
		if !held || in.disabled || in.mark == nil || !in.mark.AccessKept {
			t.Fatalf("expected app-8 marked (access kept) and not disabled, got held=%v %+v", held, in)
		}
		ev := b.retirements(wire.RetirementRetired)
		if len(ev) != 1 || !ev[0].AccessKept {
			t.Fatalf("expected one retired event saying access is kept, got %+v", ev)
		}
		b.passes(24*60*2, 30*time.Second) // a day
		if _, held := b.prov.inst(gone); !held || b.prov.count("delete") != 0 {
			t.Fatal("expected a marked consumer never removed by the loop")
		}
		if n := b.prov.count("mark"); n != 1 {
			t.Fatalf("expected one mark, got %d", n)
		}
	})
}

func TestRefusedEventsArePublishedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		b.ask(billing)
		b.prov.setFail(billing, unreachable())
		b.pass()
		b.passes(9, 30*time.Second)
		b.pub.setRefuse(true)
		b.passes(1, 30*time.Second) // 5:00, the bus is away
		b.passes(2, 30*time.Second)
		b.pub.setRefuse(false)
		b.passes(1, 30*time.Second)
		f := bodies[wire.FailingEvent](t, b.pub, wire.EventProvisionerFailing)
		if len(f) != 1 {
			t.Fatalf("expected the refused failing published once when the bus came back, got %d", len(f))
		}
	})
}

func TestHeldUnknownDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBed(t)
		all := consumers(8)
		b.ask(all...)
		b.pass()
		b.ask(all[:7]...)
		b.prov.mu.Lock()
		b.prov.heldErr = errors.New("backend away")
		b.prov.mu.Unlock()
		for range 40 {
			time.Sleep(30 * time.Second)
			if err := b.loop.Pass(t.Context()); err == nil || !strings.Contains(err.Error(), "list held consumers") {
				t.Fatalf("expected the pass to report the listing, got %v", err)
			}
		}
		if b.prov.count("disable") != 0 {
			t.Fatal("expected nothing retired while the backend's holdings are unknown")
		}
	})
}

func TestNew(t *testing.T) {
	p, pub := newFakeProvider(), &fakePublisher{}
	for _, c := range []Config{{Provider: p, Publisher: pub}, {Path: "x", Publisher: pub}, {Path: "x", Provider: p}} {
		if _, err := New(c); err == nil {
			t.Errorf("expected %+v refused", c)
		}
	}
}
