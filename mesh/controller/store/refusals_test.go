package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRefusalsKeepTheNewestAndCountAll: past MaxRefusalsKept the oldest
// are dropped from the list, never from the counts.
func TestRefusalsKeepTheNewestAndCountAll(t *testing.T) {
	var r Refusals
	for i := range MaxRefusalsKept + 7 {
		r = r.With(Refusal{Kind: RefusedOther, Key: LedgerKey("x", "", uint64(i+1))})
	}
	if r.Total() != MaxRefusalsKept+7 || len(r.Last) != MaxRefusalsKept || r.Last[0].Key != "seq:8" {
		t.Fatalf("expected %d counted, the newest %d kept from seq:8, got %d counted, %d kept from %s", MaxRefusalsKept+7, MaxRefusalsKept, r.Total(), len(r.Last), r.Last[0].Key)
	}
	r = r.With(Refusal{Kind: RefusedOther, Key: "seq:99", Reason: strings.Repeat("é", maxReason)})
	if got := r.Last[len(r.Last)-1].Reason; len(got) > maxReason+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("expected a long reason cut to %d bytes of valid UTF-8 and marked, got %d bytes", maxReason, len(got))
	}
}
