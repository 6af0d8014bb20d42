package ledger

import (
	"slices"
	"time"
)

// Traffic is what the ledgers say, read together.
type Traffic struct {
	// Emitted counts the ticker's events the bus confirmed; FirstEmitted
	// and LastEmitted are when the first and the last were.
	Emitted                   int
	FirstEmitted, LastEmitted time.Time
	// Received counts the events emitted that the tally received at least
	// once; Duplicated every delivery of one it had received already
	// (what deduplication by x-event-id absorbs).
	Received   int
	Duplicated int
	// Missing are the events emitted and not received yet, oldest first:
	// lost, if they never come.
	Missing []uint64
	// EmitSilence is the longest time between two confirmations of the
	// ticker's events, beginning at EmitSilenceFrom: how long the ticker
	// was without a bus that would take its events.
	EmitSilence     time.Duration
	EmitSilenceFrom time.Time

	// Calls counts the tally's calls of the ticker's tool once it was
	// first answered, Failed those not answered, between FirstFailed and
	// LastFailed (Why the last's). Unserved counts the calls before the
	// first answer: the tally, started before the ticker on another
	// node, calling a tool nobody serves yet.
	Calls, Failed, Unserved int
	FirstFailed, LastFailed time.Time
	Why                     string
	// FirstAnswered is when the first call was answered, Answered when the
	// last was; CallSilence the longest
	// time between two answered calls, beginning at CallSilenceFrom.
	FirstAnswered   time.Time
	Answered        time.Time
	CallSilence     time.Duration
	CallSilenceFrom time.Time
}

// Summarize reads the three ledgers together.
func Summarize(emitted, received []Entry, calls []Call) Traffic {
	var t Traffic
	want := make(map[uint64]bool, len(emitted))
	slices.SortFunc(emitted, func(a, b Entry) int { return a.At.Compare(b.At) })
	for i, e := range emitted {
		if want[e.Seq] {
			continue
		}
		want[e.Seq] = true
		if i > 0 {
			if gap := e.At.Sub(emitted[i-1].At); gap > t.EmitSilence {
				t.EmitSilence, t.EmitSilenceFrom = gap, emitted[i-1].At
			}
		}
	}
	t.Emitted = len(want)
	if len(emitted) > 0 {
		t.FirstEmitted, t.LastEmitted = emitted[0].At, emitted[len(emitted)-1].At
	}
	got := make(map[uint64]bool, len(received))
	for _, e := range received {
		if got[e.Seq] {
			t.Duplicated++
			continue
		}
		got[e.Seq] = true
		if want[e.Seq] {
			t.Received++
		}
	}
	for seq := range want {
		if !got[seq] {
			t.Missing = append(t.Missing, seq)
		}
	}
	slices.Sort(t.Missing)

	var lastOK time.Time
	for _, c := range calls {
		if lastOK.IsZero() && !c.OK {
			t.Unserved++
			continue
		}
		if t.FirstAnswered.IsZero() {
			t.FirstAnswered = c.At
		}
		t.Calls++
		if !c.OK {
			t.Failed++
			if t.FirstFailed.IsZero() {
				t.FirstFailed = c.At
			}
			t.LastFailed, t.Why = c.At, c.Why
			continue
		}
		if !lastOK.IsZero() {
			if gap := c.At.Sub(lastOK); gap > t.CallSilence {
				t.CallSilence, t.CallSilenceFrom = gap, lastOK
			}
		}
		lastOK = c.At
	}
	t.Answered = lastOK
	return t
}
