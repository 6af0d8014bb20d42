package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/meshbus/mesh/cmd/mesh-nats/internal/confcheck"
	"github.com/meshbus/mesh/cmd/mesh-nats/internal/watch"
)

// The files of the run directory.
const (
	// AppliedFile is the configuration the server loads (its -c): a copy
	// of the last content of the watched file that passed every check.
	// The server never reads the watched file itself, so nothing written
	// there reaches it unchecked, even mid-write.
	AppliedFile = "nats.conf"
	// candidateFile is where a new content is put for the server's check
	// and, once it passes, renamed to AppliedFile.
	candidateFile = "candidate.conf"
)

// checkFunc is the server's verdict on a candidate file; running is the
// file the server runs on, "" at start (see serverCheck).
type checkFunc func(ctx context.Context, candidate, running string) error

// applier decides whether a content of the watched file may be served and,
// if so, hands it to the server: whole and closed (confcheck), accepted by
// nats-server itself, and reloadable from what runs now.
type applier struct {
	watched string // the file watched, for log lines
	dir     string // the run directory
	check   checkFunc
	reload  func() error // tells the server to load AppliedFile again
	log     *slog.Logger
	serving []byte // the content the server was last given
}

func newApplier(o options, reload func() error, log *slog.Logger) *applier {
	return &applier{
		watched: o.config,
		dir:     o.runDir,
		check: func(ctx context.Context, candidate, running string) error {
			return serverCheck(ctx, o.server, candidate, running)
		},
		reload: reload,
		log:    log,
	}
}

// applied is the path of the configuration the server loads.
func (a *applier) applied() string { return filepath.Join(a.dir, AppliedFile) }

// start makes content the server's first configuration, or says why it
// may not be.
func (a *applier) start(ctx context.Context, content []byte) error {
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	if err := confcheck.Check(content); err != nil {
		return err
	}
	cand, err := a.writeCandidate(content)
	if err != nil {
		return err
	}
	if err := a.check(ctx, cand, ""); err != nil {
		return err
	}
	if err := os.Rename(cand, a.applied()); err != nil {
		return fmt.Errorf("install configuration: %w", err)
	}
	a.serving = content
	return nil
}

// change is the watcher's Notify: it applies c if every check passes and
// otherwise says why not, once, and keeps the server on what it runs.
func (a *applier) change(c watch.Change) error {
	refuse := func(err error) error {
		a.log.Error("configuration refused; the server keeps the last good one",
			"path", a.watched, "hash", short(c.New), "serving", short(c.Old), "reason", err.Error())
		return fmt.Errorf("%w: %w", watch.ErrRefused, err)
	}
	if err := confcheck.Check(c.Content); err != nil {
		return refuse(err)
	}
	if sameDocument(a.serving, c.Content) {
		a.log.Info("configuration changed in white space only; nothing to reload", "path", a.watched,
			"hash", short(c.New))
		return nil
	}
	cand, err := a.writeCandidate(c.Content)
	if err != nil {
		return err
	}
	if err := a.check(context.Background(), cand, a.applied()); err != nil {
		if refusal(err) {
			return refuse(err)
		}
		// The check itself failed to run: the watcher says so, once, and
		// tries again on the next poll.
		return err
	}
	if err := os.Rename(cand, a.applied()); err != nil {
		return fmt.Errorf("install configuration: %w", err)
	}
	if err := a.reload(); err != nil {
		return err
	}
	a.serving = c.Content
	a.log.Info("configuration applied", "path", a.watched, "applied", a.applied(),
		"old", short(c.Old), "new", short(c.New))
	return nil
}

// refusal reports whether err is a verdict on the configuration rather
// than a failure to reach one.
func refusal(err error) bool {
	for _, sentinel := range []error{confcheck.ErrNotWhole, confcheck.ErrOpen, confcheck.ErrAmbiguous,
		ErrServerRefused, ErrNeedsRestart, watch.ErrUnreadable} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

func (a *applier) writeCandidate(content []byte) (string, error) {
	cand := filepath.Join(a.dir, candidateFile)
	if err := os.WriteFile(cand, content, 0o600); err != nil {
		return "", fmt.Errorf("write candidate configuration: %w", err)
	}
	return cand, nil
}

// sameDocument reports whether a and b are the same JSON document, white
// space aside: reloading one for the other would change nothing.
func sameDocument(a, b []byte) bool {
	if a == nil {
		return false
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
