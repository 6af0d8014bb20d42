package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/imagecatalog"
	"github.com/meshbus/mesh/harness/images"
)

// buildImages is `bedrun images`: every image the beds use, the Debian ones too, built when
// missing or stale.
func buildImages(ctx context.Context, stderr io.Writer) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "bedrun images: %v\n", err)
		return exitFail
	}
	reg, err := conformance.Load()
	if err != nil {
		fmt.Fprintf(stderr, "bedrun images: %v\n", err)
		return exitFail
	}
	b := &images.Builder{Root: root, Out: stderr, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	start := time.Now()
	refs, err := imagecatalog.New(b, reg, os.Getenv).Ensure(ctx)
	for _, ref := range refs {
		fmt.Fprintf(stderr, "  %s\n", ref)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bedrun images: %v\n", err)
		if errors.Is(context.Cause(ctx), errInterrupted) {
			return exitInterrupted
		}
		return exitFail
	}
	fmt.Fprintf(stderr, "bedrun images: %d images ready in %s\n", len(refs), time.Since(start).Round(100*time.Millisecond))
	return exitPass
}

// moduleRoot is the directory holding go.mod at or above the working directory: images are
// built from the checkout, wherever in it bedrun is started.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod at or above the working directory")
		}
		dir = parent
	}
}
