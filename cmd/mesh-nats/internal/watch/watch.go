// Package watch polls one file and reports when its content changes.
//
// The nats image's entrypoint uses it to answer a rewritten configuration
// file with SIGHUP (design 25 §5), once it has checked the new content. It
// compares content, not modification
// times: the controller rewrites the file atomically (temp file + rename)
// and may rewrite it unchanged, and neither a new inode nor a new mtime is a
// reason to reload. Polling rather than inotify, because the file lives in a
// bind-mounted directory where host-side events are not reliably delivered
// into the container, and a one-second poll of one small file costs nothing.
package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrUnreadable is wrapped by Poll and Prime when the file cannot be
	// read, which is expected for a moment while it is being replaced.
	ErrUnreadable = errors.New("file unreadable")
	// ErrRefused is what Notify wraps to refuse a content for good: the
	// watcher keeps its baseline and does not offer that content again
	// until the file changes or Kick asks for it.
	ErrRefused = errors.New("content refused")
)

// Change is one observed change of the file's content.
type Change struct {
	// Old is the hex sha256 of the content last accepted, New that of
	// Content.
	Old, New string
	// Content is the new content, exactly as read: what a check passes
	// is what gets applied, with no second read in between.
	Content []byte
}

// Options configures a Watcher.
type Options struct {
	// Path is the one file watched.
	Path string
	// Interval is how often Run polls; it must be positive.
	Interval time.Duration
	// Notify is called once per observed content change. If it returns
	// an error wrapping ErrRefused, the content is not accepted and not
	// offered again until the file changes (or Kick); any other error
	// means the change is not recorded and the next poll tries again.
	Notify func(Change) error
	// Logger receives warnings about an unreadable file; nil discards them.
	Logger *slog.Logger
}

// Watcher remembers the hash of the content it last acted on and compares
// each poll against it. It is not safe for concurrent use: one goroutine
// calls Prime, Poll or Run; Kick may be called from any.
type Watcher struct {
	opts    Options
	log     *slog.Logger
	last    string // hex sha256 of the content last acted on; "" until first read
	refused string // hex sha256 of the content Notify last refused; "" if none
	kick    chan struct{}
}

// New checks the options and returns a Watcher that has not read the file
// yet; call Prime before starting whatever reads the file, so that a change
// made in between is not missed.
func New(o Options) (*Watcher, error) {
	if o.Path == "" {
		return nil, errors.New("new watcher: empty path")
	}
	if o.Interval <= 0 {
		return nil, fmt.Errorf("new watcher: poll interval %v is not positive", o.Interval)
	}
	if o.Notify == nil {
		return nil, errors.New("new watcher: nil notify func")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{opts: o, log: log, kick: make(chan struct{}, 1)}, nil
}

// Hash is the hex sha256 of the content last acted on, "" if the file has
// never been read.
func (w *Watcher) Hash() string { return w.last }

// Prime records the current content as the baseline without notifying,
// and returns it: the caller checks and applies exactly these bytes.
func (w *Watcher) Prime() ([]byte, error) {
	b, h, err := w.read()
	if err != nil {
		return nil, err
	}
	w.last = h
	return b, nil
}

// Poll reads the file once and calls Notify if its content differs from
// the baseline. An unreadable file (missing mid-rename) is not a change: Poll
// returns an error wrapping ErrUnreadable and keeps the baseline. If the file
// was never read before, the first successful read becomes the baseline. A
// content Notify refused is not offered again: Poll reports no change until
// the content differs from it.
func (w *Watcher) Poll() (changed bool, err error) {
	b, h, err := w.read()
	if err != nil {
		return false, err
	}
	if w.last == "" {
		w.last = h
		return false, nil
	}
	if h == w.last {
		if w.refused != "" {
			w.refused = ""
			w.log.Info("file is back to the content last accepted", "path", w.opts.Path, "hash", short(h))
		}
		return false, nil
	}
	if h == w.refused {
		return false, nil
	}
	if err := w.opts.Notify(Change{Old: w.last, New: h, Content: b}); err != nil {
		if errors.Is(err, ErrRefused) {
			w.refused = h
		}
		return false, fmt.Errorf("notify change of %s: %w", w.opts.Path, err)
	}
	w.last, w.refused = h, ""
	return true, nil
}

// Kick makes Run poll at once, offering a content refused before to Notify
// again: an operator's way to retry a file whose refusal depended on
// something else (a TLS file it names, say) without changing the file.
func (w *Watcher) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run polls every Interval until ctx is done, then returns nil. Errors of a
// poll are logged, once per streak, and never end the loop: the file may be
// mid-replacement and the next poll will see it.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.kick:
			w.refused = ""
		}
		_, err := w.Poll()
		switch {
		case errors.Is(err, ErrRefused):
			// Notify has said why; the content is not offered again.
		case err != nil && !failing:
			failing = true
			w.log.Warn("poll failed, retrying every interval", "path", w.opts.Path, "err", err)
		case err == nil && failing:
			failing = false
			w.log.Info("poll succeeded again", "path", w.opts.Path)
		}
	}
}

func (w *Watcher) read() ([]byte, string, error) {
	b, err := os.ReadFile(w.opts.Path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// short abbreviates a hex hash for log lines.
func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
