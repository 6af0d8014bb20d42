// Command build-images builds the project's images from the checkout when
// they are missing or their inputs changed (harness/images); `make images`
// runs it. With names, it builds only those images (harness/imagecatalog
// names them all).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/imagecatalog"
	"github.com/meshbus/mesh/harness/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("prog", "build-images")
	reg, err := conformance.Load()
	if err != nil {
		log.Error("read the conformance registry", "err", err)
		return 1
	}
	fs := flag.NewFlagSet("build-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "module root `dir` (default: the module of the working directory)")
	tag := fs.String("tag", cmp.Or(images.TagFromEnv(os.Getenv), "local"), "image `tag` (default $MESH_IMAGE_TAG, else local)")
	b := &images.Builder{Out: stdout}
	defer b.Close()
	catalog := imagecatalog.New(b, reg, os.Getenv)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: build-images [flags] [image ...]\n\n"+
			"Builds the images (default all: %s) when missing or stale.\n\nFlags:\n", strings.Join(catalog.Names(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *root == "" {
		r, err := moduleRoot(ctx)
		if err != nil {
			log.Error("find module root", "err", err)
			return 1
		}
		*root = r
	}
	b.Root, b.Tag = *root, *tag

	start := time.Now()
	ready, err := catalog.Ensure(ctx, fs.Args()...)
	if errors.Is(err, imagecatalog.ErrUnknown) {
		fmt.Fprintf(stderr, "build-images: %v\n", err)
		return 2
	}
	if err != nil {
		log.Error("build images", "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
		return 1
	}
	slices.Sort(ready)
	fmt.Fprintf(stdout, "ready in %.1fs: %s\n", time.Since(start).Seconds(), strings.Join(ready, " "))
	return 0
}

// moduleRoot is the directory of the go.mod governing the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module; pass --root")
	}
	return filepath.Dir(gomod), nil
}
