package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// The status and the dead letters on a bus that keeps no positions
// (AMQP): the feeds' deliveries are at position 0, and what is handed
// again is known by its event id.

// TestAtNoPositionARedeliveryOfTheLastIsKnownByItsID: events at position 0
// are folded in the order handed over; the last one handed again (the
// controller stopped between saving and acknowledging) is acknowledged
// without being applied or saved again; one with neither a position nor
// an event id is terminated, since nothing would know it again.
func TestAtNoPositionARedeliveryOfTheLastIsKnownByItsID(t *testing.T) {
	st := &awayStore{}
	f := &follower{ctx: context.Background(), store: st, status: store.Status{Through: 12, Failing: []store.FailingProvision{}}, log: slog.New(slog.DiscardHandler)}
	fail := failingWord("pg", "logger", "node-b", wire.ClassTimeout, said0)
	recovered := recoveredWord("pg", "logger", "node-b")

	for i, c := range []struct {
		w       word
		settled string
		saved   int
		failing int
	}{
		{fail, "ack", 1, 1},
		{fail, "ack", 1, 1}, // handed again: known, not saved again
		{recovered, "ack", 2, 0},
		{recovered, "ack", 2, 0},
		{fail, "ack", 3, 1}, // not the last: a new event, in the bus's order
	} {
		d := &delivery{seq: 0, w: c.w}
		f.fold(d)
		if strings.Join(d.settled, ",") != c.settled || len(st.saved) != c.saved || len(f.status.Failing) != c.failing {
			t.Fatalf("delivery %d (%s): expected %s, %d saved, %d failing; got %v, %d saved, %d failing", i, c.w.subject, c.settled, c.saved, c.failing, d.settled, len(st.saved), len(f.status.Failing))
		}
	}
	if f.status.Through != 12 {
		t.Fatalf("expected through left at 12 (the stream last folded), got %d", f.status.Through)
	}
	noID := failingWord("pg", "logger", "node-b", wire.ClassTimeout, said0)
	delete(noID.header, wire.HeaderEventID)
	d := &delivery{seq: 0, w: noID}
	f.fold(d)
	if strings.Join(d.settled, ",") != "term" || len(st.saved) != 3 {
		t.Fatalf("an event with neither a position nor an id: expected terminated and nothing saved, got %v, %d saved", d.settled, len(st.saved))
	}
}

// statusStore is awayStore with a status to start from.
type statusStore struct {
	awayStore
	held store.Status
}

func (s *statusStore) Status(context.Context) (store.Status, error) { return s.held, nil }

// queueFeed is a bus keeping no positions: the zero origin, and the
// deliveries it was given handed over at once.
type queueFeed struct{ deliveries []*delivery }

func (q *queueFeed) EventsOrigin(context.Context) (plane.EventsOrigin, error) {
	return plane.EventsOrigin{}, nil
}

func (q *queueFeed) FollowEvents(_ context.Context, deliver func(plane.EventMsg)) (func(), error) {
	for _, d := range q.deliveries {
		deliver(d)
	}
	return func() {}, nil
}

// TestAtNoPositionTheStatusIsNotRebased: on a bus with the zero origin
// there is no stream to compare the status with: Through and
// EventsCreated, those of the stream last folded, are kept (no warning,
// nothing saved at start), and the redelivery of the event folded last
// before the restart is known by its id.
func TestAtNoPositionTheStatusIsNotRebased(t *testing.T) {
	created := since0.Add(-time.Hour)
	fail := failingWord("pg", "logger", "node-b", wire.ClassTimeout, said0)
	st := &statusStore{held: store.Status{Through: 40, EventsCreated: created, LastEventID: wire.HeaderValue(fail.header, wire.HeaderEventID), Failing: []store.FailingProvision{}}}
	again := &delivery{seq: 0, w: fail}
	next := &delivery{seq: 0, w: recoveredWord("pg", "logger", "node-b")}
	stop, err := FollowStatus(context.Background(), &queueFeed{deliveries: []*delivery{again, next}}, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if strings.Join(again.settled, ",") != "ack" || strings.Join(next.settled, ",") != "ack" {
		t.Fatalf("expected both acknowledged, got %v and %v", again.settled, next.settled)
	}
	if len(st.saved) != 1 {
		t.Fatalf("expected one save (the new event's), got %d: %+v", len(st.saved), st.saved)
	}
	if s := st.saved[0]; s.Through != 40 || !s.EventsCreated.Equal(created) || s.LastEventID != wire.HeaderValue(next.w.header, wire.HeaderEventID) {
		t.Fatalf("expected through 40 of the stream created at %v kept, and the new event's id, got %+v", created, s)
	}
}

// deadStore keeps dead letters as a store does, by their key, and can be
// taken away.
type deadStore struct {
	store.Store // not called: FollowDead uses DeadLetters and Update alone
	mu          sync.Mutex
	err         error
	dead        map[string]store.DeadLetter
	puts        int
}

func (s *deadStore) DeadLetters(context.Context) ([]store.DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(func(yield func(store.DeadLetter) bool) {
		for _, d := range s.dead {
			if !yield(d) {
				return
			}
		}
	})
	store.SortDeadLetters(out)
	return out, nil
}

func (s *deadStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return fn(deadTx{s: s})
}

type deadTx struct {
	store.Tx // not called: FollowDead puts dead letters alone
	s        *deadStore
}

func (tx deadTx) PutDeadLetter(_ context.Context, d store.DeadLetter) error {
	if err := store.CheckDeadLetter(d); err != nil {
		return err
	}
	tx.s.dead[d.Key()] = d
	tx.s.puts++
	return nil
}

// letterFeed hands over the letters it was given and keeps what deliver
// answered for each.
type letterFeed struct {
	letters []plane.Dead
	after   uint64
	answers []error
}

func (f *letterFeed) FollowDead(_ context.Context, after uint64, deliver func(plane.Dead) error) (func(), error) {
	f.after = after
	for _, d := range f.letters {
		f.answers = append(f.answers, deliver(d))
	}
	return func() {}, nil
}

// TestAtNoPositionADeadLetterIsRecordedOnce: letters at no position are
// recorded by their consumer and event id, once however often handed
// over, apart from the letters of DEAD (whose sequences alone make the
// position followed after); one with neither a position nor an id is
// passed, recorded nowhere.
func TestAtNoPositionADeadLetterIsRecordedOnce(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	st := &deadStore{dead: map[string]store.DeadLetter{}}
	st.dead[store.DeadLetter{DeadSeq: 9, Consumer: "node-b_logger"}.Key()] = store.DeadLetter{DeadSeq: 9, Consumer: "node-b_logger", EventID: "old", At: at}
	letter := plane.Dead{Consumer: "node-b_logger", Subject: wire.EventSubject("sensor", "reading"), EventID: "e1", Deliveries: 2, At: at}
	other := letter
	other.EventID = "e2"
	anonymous := letter
	anonymous.EventID = ""
	feed := &letterFeed{letters: []plane.Dead{letter, letter, other, anonymous}}
	stop, err := FollowDead(context.Background(), feed, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if feed.after != 9 || !slices.Equal(feed.answers, []error{nil, nil, nil, nil}) {
		t.Fatalf("expected following after 9 and every letter answered as recorded or passed, got after %d, %v", feed.after, feed.answers)
	}
	dead, _ := st.DeadLetters(context.Background())
	var got []string
	for _, d := range dead {
		got = append(got, fmt.Sprintf("%d/%s/%s/%s", d.DeadSeq, d.EventID, d.Node, d.Module))
	}
	if want := []string{"0/e1/node-b/logger", "0/e2/node-b/logger", "9/old//"}; !slices.Equal(got, want) {
		t.Fatalf("expected %v, got %v", want, got)
	}
}

// TestADeadLetterNotSavedIsNotAnsweredAsRecorded: a letter the store does
// not take when the follower stops is answered with an error, so a bus
// that takes letters away as they are recorded keeps it.
func TestADeadLetterNotSavedIsNotAnsweredAsRecorded(t *testing.T) {
	st := &deadStore{dead: map[string]store.DeadLetter{}, err: fmt.Errorf("write: %w", store.ErrStoreUnavailable)}
	ctx, cancel := context.WithCancel(context.Background())
	var answer error
	done := make(chan struct{})
	feed := deadFeedFunc(func(deliver func(plane.Dead) error) {
		go func() {
			defer close(done)
			answer = deliver(plane.Dead{Consumer: "node-b_logger", EventID: "e1", Deliveries: 2})
		}()
	})
	stop, err := FollowDead(ctx, feed, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deliver did not return once the follower stopped")
	}
	if answer == nil || !errors.Is(answer, context.Canceled) || st.puts != 0 {
		t.Fatalf("expected the letter answered as not recorded, got %v (%d saved)", answer, st.puts)
	}
}

type deadFeedFunc func(deliver func(plane.Dead) error)

func (f deadFeedFunc) FollowDead(_ context.Context, _ uint64, deliver func(plane.Dead) error) (func(), error) {
	f(deliver)
	return func() {}, nil
}
