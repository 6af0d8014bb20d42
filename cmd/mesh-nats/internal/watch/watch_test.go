package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// recorder counts Notify calls and remembers their hashes.
type recorder struct {
	calls   [][2]string
	content []string // the content of each accepted call
	offered int      // every call, refused or not
	fail    int      // fail this many calls before succeeding
	refuse  string   // refuse this content
}

func (r *recorder) notify(c Change) error {
	r.offered++
	if string(c.Content) == r.refuse {
		return fmt.Errorf("not whole: %w", ErrRefused)
	}
	if r.fail > 0 {
		r.fail--
		return errors.New("child gone")
	}
	r.calls = append(r.calls, [2]string{c.Old, c.New})
	r.content = append(r.content, string(c.Content))
	return nil
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace swaps the file atomically the way the controller does.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newPrimed(t *testing.T, content string) (*Watcher, *recorder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	write(t, path, content)
	rec := &recorder{}
	w, err := New(Options{Path: path, Interval: time.Second, Notify: rec.notify,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Prime()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Fatalf("expected Prime to return the content it took as the baseline, got %q", got)
	}
	return w, rec, path
}

func mustPoll(t *testing.T, w *Watcher, want bool) {
	t.Helper()
	changed, err := w.Poll()
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if changed != want {
		t.Fatalf("poll changed = %v, expected %v", changed, want)
	}
}

func TestContentChangeNotifiesOnce(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	mustPoll(t, w, false)
	write(t, path, `{"a":2}`)
	mustPoll(t, w, true)
	mustPoll(t, w, false)
	if len(rec.calls) != 1 {
		t.Fatalf("expected 1 notify, got %d", len(rec.calls))
	}
	if got := rec.calls[0]; got != [2]string{hashOf(`{"a":1}`), hashOf(`{"a":2}`)} {
		t.Fatalf("expected old/new hashes of the two contents, got %v", got)
	}
	if rec.content[0] != `{"a":2}` {
		t.Fatalf("expected the new content with the change, got %q", rec.content[0])
	}
	if w.Hash() != hashOf(`{"a":2}`) {
		t.Fatalf("expected baseline to move to the new content, got %s", w.Hash())
	}
}

func TestSameContentRewriteDoesNotNotify(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	write(t, path, `{"a":1}`)
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	mustPoll(t, w, false)
	replace(t, path, `{"a":1}`) // new inode, same bytes
	mustPoll(t, w, false)
	if len(rec.calls) != 0 {
		t.Fatalf("expected no notify for unchanged content, got %d", len(rec.calls))
	}
}

func TestAtomicReplacementNotifies(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	replace(t, path, `{"a":2}`)
	mustPoll(t, w, true)
	if len(rec.calls) != 1 {
		t.Fatalf("expected 1 notify, got %d", len(rec.calls))
	}
}

func TestBrieflyMissingFileIsNotAChange(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	changed, err := w.Poll()
	if !errors.Is(err, ErrUnreadable) || changed {
		t.Fatalf("expected (false, ErrUnreadable) for a missing file, got (%v, %v)", changed, err)
	}
	write(t, path, `{"a":1}`) // back with the same content
	mustPoll(t, w, false)
	write(t, path, `{"a":2}`)
	mustPoll(t, w, true)
	if len(rec.calls) != 1 || rec.calls[0][0] != hashOf(`{"a":1}`) {
		t.Fatalf("expected exactly one notify from the original content, got %v", rec.calls)
	}
}

func TestFailedNotifyIsRetried(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	rec.fail = 1
	write(t, path, `{"a":2}`)
	if changed, err := w.Poll(); err == nil || changed {
		t.Fatalf("expected the failed notify to be reported, got (%v, %v)", changed, err)
	}
	mustPoll(t, w, true)
	if len(rec.calls) != 1 {
		t.Fatalf("expected the retry to notify once, got %d", len(rec.calls))
	}
}

func TestFirstReadBecomesBaseline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nats.conf")
	rec := &recorder{}
	w, err := New(Options{Path: path, Interval: time.Second, Notify: rec.notify})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Prime(); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("expected ErrUnreadable priming a missing file, got %v", err)
	}
	write(t, path, `{"a":1}`)
	mustPoll(t, w, false)
	write(t, path, `{"a":2}`)
	mustPoll(t, w, true)
}

// TestRefusedContentIsNotOfferedAgain: a refusal keeps the baseline, the
// same content is not offered again however often it is polled, and the
// next different content is.
func TestRefusedContentIsNotOfferedAgain(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	rec.refuse = `{"a":`
	write(t, path, `{"a":`)
	if changed, err := w.Poll(); !errors.Is(err, ErrRefused) || changed {
		t.Fatalf("expected (false, ErrRefused) for a refused content, got (%v, %v)", changed, err)
	}
	mustPoll(t, w, false)
	mustPoll(t, w, false)
	if rec.offered != 1 || w.Hash() != hashOf(`{"a":1}`) {
		t.Fatalf("expected the refused content offered once and the baseline kept, got %d offers, baseline %s", rec.offered, w.Hash())
	}
	write(t, path, `{"a":3}`)
	mustPoll(t, w, true)
	if len(rec.content) != 1 || rec.content[0] != `{"a":3}` || rec.calls[0][0] != hashOf(`{"a":1}`) {
		t.Fatalf("expected the next content accepted as a change from the last accepted one, got %v %q", rec.calls, rec.content)
	}
}

// TestBackToAcceptedAfterRefusal: a file that returns to the content last
// accepted is no change, and a later refusal of the same content is said
// again.
func TestBackToAcceptedAfterRefusal(t *testing.T) {
	w, rec, path := newPrimed(t, `{"a":1}`)
	rec.refuse = `{"a":`
	write(t, path, `{"a":`)
	if _, err := w.Poll(); !errors.Is(err, ErrRefused) {
		t.Fatalf("expected ErrRefused, got %v", err)
	}
	write(t, path, `{"a":1}`)
	mustPoll(t, w, false)
	write(t, path, `{"a":`)
	if _, err := w.Poll(); !errors.Is(err, ErrRefused) {
		t.Fatalf("expected the same torn content refused again after the file was whole in between, got %v", err)
	}
	if rec.offered != 2 || len(rec.calls) != 0 {
		t.Fatalf("expected 2 offers and none accepted, got %d offers, %d accepted", rec.offered, len(rec.calls))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	ok := func(Change) error { return nil }
	for name, o := range map[string]Options{
		"empty path":    {Interval: time.Second, Notify: ok},
		"zero interval": {Path: "x", Notify: ok},
		"nil notify":    {Path: "x", Interval: time.Second},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

// TestRunPollsEveryInterval drives Run with synctest's fake clock: each
// interval is one poll, a missing file does not stop the loop, and
// cancelling the context ends it.
func TestRunPollsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, rec, path := newPrimed(t, `{"a":1}`)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		tick := func() {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		write(t, path, `{"a":2}`)
		tick()
		if len(rec.calls) != 1 {
			t.Fatalf("after one interval: expected 1 notify, got %d", len(rec.calls))
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		tick()
		tick()
		write(t, path, `{"a":2}`)
		tick()
		if len(rec.calls) != 1 {
			t.Fatalf("after a missing spell and the same content: expected 1 notify, got %d", len(rec.calls))
		}
		write(t, path, `{"a":3}`)
		tick()
		if len(rec.calls) != 2 {
			t.Fatalf("after a second change: expected 2 notifies, got %d", len(rec.calls))
		}

		// A refused content is offered once, then again only when kicked;
		// the kick polls at once, without waiting for the interval.
		rec.refuse = `{"a":4}`
		write(t, path, `{"a":4}`)
		tick()
		tick()
		if rec.offered != 3 {
			t.Fatalf("after a refused content and two intervals: expected 3 offers, got %d", rec.offered)
		}
		rec.refuse = ""
		time.Sleep(time.Second / 2) // half-way to the next tick
		synctest.Wait()
		w.Kick()
		synctest.Wait()
		if rec.offered != 4 || len(rec.calls) != 3 {
			t.Fatalf("after a kick: expected the content offered again at once and accepted, got %d offers, %d accepted", rec.offered, len(rec.calls))
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v", err)
			}
		default:
			t.Fatal("run did not return after cancel")
		}
	})
}
