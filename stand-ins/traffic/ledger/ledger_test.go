package ledger

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestATornLastLineIsSkippedAndABadOneNamed(t *testing.T) {
	es, err := ReadEntries([]byte(EntryLine(1, at(0)) + "\n" + EntryLine(2, at(50)) + "\n3 17"))
	if err != nil || len(es) != 2 || es[1].Seq != 2 || !es[1].At.Equal(at(50)) {
		t.Fatalf("expected the two whole lines, got %+v, %v", es, err)
	}
	if _, err := ReadEntries([]byte("1 2\nx 3\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("expected line 2 named, got %v", err)
	}
	cs, err := ReadCalls([]byte(CallLine(at(0), nil) + "\n" + CallLine(at(100), errors.New("call ticker.echo:\n no responders")) + "\nok 1"))
	if err != nil || len(cs) != 2 || !cs[0].OK || cs[1].OK || cs[1].Why != "call ticker.echo: no responders" {
		t.Fatalf("expected an answered call and a failed one with its reason on one line, got %+v, %v", cs, err)
	}
	if _, err := ReadCalls([]byte("maybe 1\n")); err == nil {
		t.Fatal("expected a call neither ok nor failed refused")
	}
}

func TestATickerStartedAgainGoesOnAfterItsLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), EmittedFile)
	if seq, err := LastSeq(path); err != nil || seq != 0 {
		t.Fatalf("expected 0 before the first event, got %d, %v", seq, err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := Append(path, EntryLine(seq, at(int(seq)))); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := LastSeq(path); err != nil || seq != 3 {
		t.Fatalf("expected 3, got %d, %v", seq, err)
	}
}

func TestSummarizeCountsWhatWasLostDuplicatedAndSilent(t *testing.T) {
	emitted := []Entry{{1, at(0)}, {2, at(50)}, {3, at(1550)}, {4, at(1600)}}
	received := []Entry{{1, at(10)}, {2, at(60)}, {2, at(2000)}, {4, at(1610)}}
	calls := []Call{{OK: true, At: at(0)}, {OK: false, At: at(100), Why: "a"}, {OK: false, At: at(200), Why: "b"}, {OK: true, At: at(900)}}
	tr := Summarize(emitted, received, calls)
	if tr.Emitted != 4 || tr.Received != 3 || tr.Duplicated != 1 || !slices.Equal(tr.Missing, []uint64{3}) {
		t.Fatalf("expected 4 emitted, 3 received, 1 duplicated and 3 missing, got %+v", tr)
	}
	if tr.EmitSilence != 1500*time.Millisecond || !tr.EmitSilenceFrom.Equal(at(50)) {
		t.Fatalf("expected 1.5 s without emitting from 50 ms, got %v from %v", tr.EmitSilence, tr.EmitSilenceFrom)
	}
	if tr.Calls != 4 || tr.Failed != 2 || !tr.FirstFailed.Equal(at(100)) || !tr.LastFailed.Equal(at(200)) || tr.Why != "b" {
		t.Fatalf("expected 2 of 4 calls failed from 100 to 200 ms, the last for b, got %+v", tr)
	}
	if tr.CallSilence != 900*time.Millisecond || !tr.Answered.Equal(at(900)) {
		t.Fatalf("expected 900 ms without an answer, the last at 900 ms, got %v, %v", tr.CallSilence, tr.Answered)
	}
}

func TestCallsBeforeTheToolWasFirstAnsweredAreUnservedNotFailed(t *testing.T) {
	calls := []Call{{OK: false, At: at(0), Why: "no responders"}, {OK: false, At: at(100), Why: "no responders"},
		{OK: true, At: at(200)}, {OK: false, At: at(300), Why: "timeout"}, {OK: true, At: at(400)}}
	tr := Summarize(nil, nil, calls)
	if tr.Unserved != 2 || tr.Calls != 3 || tr.Failed != 1 || !tr.FirstFailed.Equal(at(300)) || tr.Why != "timeout" || !tr.FirstAnswered.Equal(at(200)) {
		t.Fatalf("expected 2 calls before the first answer apart, and 1 of the 3 after it failed at 300 ms, got %+v", tr)
	}
}
