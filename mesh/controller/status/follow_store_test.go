package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// awayStore is a store that can be taken away, as a database stopped would
// be: while err is set every Update fails with it and nothing is saved.
type awayStore struct {
	store.Store // not called: the follower uses Update and Status alone
	mu          sync.Mutex
	err         error
	saved       []store.Status
}

func (s *awayStore) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *awayStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	tx := &awayTx{}
	if err := fn(tx); err != nil {
		return err
	}
	if tx.put != nil {
		s.saved = append(s.saved, *tx.put)
	}
	return nil
}

type awayTx struct {
	store.Tx
	put *store.Status
}

func (tx *awayTx) PutStatus(_ context.Context, s store.Status) error {
	tx.put = &s
	return nil
}

// delivery is one delivery of EVENTS as the consumer hands it over, and
// how it was settled.
type delivery struct {
	seq     uint64
	w       word
	settled []string
}

func (d *delivery) Position() uint64            { return d.seq }
func (d *delivery) Subject() string             { return d.w.subject }
func (d *delivery) Header() map[string][]string { return d.w.header }
func (d *delivery) Data() []byte                { return d.w.body }
func (d *delivery) Ack(context.Context) error   { d.settled = append(d.settled, "ack"); return nil }
func (d *delivery) Term() error                 { d.settled = append(d.settled, "term"); return nil }
func (d *delivery) Hold(delay time.Duration) error {
	d.settled = append(d.settled, fmt.Sprintf("nak %v", delay))
	return nil
}

// TestAStoreAwayHoldsTheEvent: while the store is unavailable, a delivery
// is neither acknowledged nor terminated but nak'd with a delay that grows
// to a ceiling, and the status in hand stays what the store holds; once
// the store is back, the same delivery is folded and acknowledged. A store
// refusing for another reason holds the event too, asked again soon.
func TestAStoreAwayHoldsTheEvent(t *testing.T) {
	st := &awayStore{}
	var logs testutil.SyncBuffer
	f := &follower{ctx: context.Background(), store: st, status: store.Status{Failing: []store.FailingProvision{}}, log: slog.New(slog.NewJSONHandler(&logs, nil))}
	w := failingWord("pg", "logger", "node-b", wire.ClassTimeout, said0)

	st.set(fmt.Errorf("save status: %w: connection refused", store.ErrStoreUnavailable))
	var delays []string
	for range 6 {
		d := &delivery{seq: 1, w: w}
		f.fold(d)
		if len(d.settled) != 1 || !strings.HasPrefix(d.settled[0], "nak ") {
			t.Fatalf("a delivery while the store is away: expected one nak with a delay, got %v", d.settled)
		}
		delays = append(delays, d.settled[0])
	}
	if want := []string{"nak 1s", "nak 2s", "nak 4s", "nak 8s", "nak 15s", "nak 15s"}; strings.Join(delays, ",") != strings.Join(want, ",") {
		t.Fatalf("delays while the store is away: expected %v, got %v", want, delays)
	}
	if f.status.Through != 0 || len(st.saved) != 0 {
		t.Fatalf("the status moved while the store was away: through %d, saved %v", f.status.Through, st.saved)
	}
	if !strings.Contains(logs.String(), "the store is unavailable") {
		t.Errorf("expected the store's absence logged, got:\n%s", logs.String())
	}

	st.set(nil)
	d := &delivery{seq: 1, w: w}
	f.fold(d)
	if strings.Join(d.settled, ",") != "ack" || len(st.saved) != 1 || st.saved[0].Through != 1 || len(st.saved[0].Failing) != 1 {
		t.Fatalf("once the store is back: expected the event saved then acknowledged; settled %v, saved %+v", d.settled, st.saved)
	}

	// The next absence starts again from the shortest delay; a store that
	// refuses (not unavailable) is asked again after statusRetry.
	st.set(fmt.Errorf("write status.json: %w", store.ErrStoreUnavailable))
	d = &delivery{seq: 2, w: recoveredWord("pg", "logger", "node-b")}
	f.fold(d)
	if strings.Join(d.settled, ",") != "nak 1s" {
		t.Fatalf("a new absence: expected nak 1s, got %v", d.settled)
	}
	st.set(errors.New("rename status.json: is a directory"))
	for range 3 {
		d = &delivery{seq: 2, w: recoveredWord("pg", "logger", "node-b")}
		f.fold(d)
		if strings.Join(d.settled, ",") != fmt.Sprintf("nak %v", statusRetry) {
			t.Fatalf("a store refusing: expected nak %v each time, got %v", statusRetry, d.settled)
		}
	}
	if f.status.Through != 1 || len(st.saved) != 1 {
		t.Fatalf("the status moved while the store refused: through %d, saved %d", f.status.Through, len(st.saved))
	}
}
