// Command build-images builds the project's images from the checkout when
// they are missing or their inputs changed (harness/images); `make images`
// runs it. With names, it builds only those images. The conformance
// drivers are those of conformance/registry.yaml, each by its recipe.
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
	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/postgres"
	"github.com/meshbus/mesh/harness/rabbitmq"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// rabbitmqImage, postgresImage and netemImage are the names the Debian
// images (the broker, the controller's store, the link faults' helper)
// are asked for by.
const (
	rabbitmqImage = "mesh-rabbitmq"
	postgresImage = "mesh-postgres"
	netemImage    = "mesh-netem"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("prog", "build-images")
	reg, err := conformance.Load()
	if err != nil {
		log.Error("read the conformance registry", "err", err)
		return 1
	}
	all := images.All()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	// The drivers not written in Go (whose images are in All()) are made
	// of Debian's packages, as the broker, the store and the netem helper
	// are (it adds a binary of ours): they are not Specs, and are built
	// last.
	var nodeDrivers []conformance.Implementation
	for _, impl := range reg.Implementations {
		if impl.Node != "" {
			nodeDrivers = append(nodeDrivers, impl)
			names = append(names, images.DriverName(impl.Name))
		}
	}
	names = append(names, rabbitmqImage, postgresImage, netemImage)

	fs := flag.NewFlagSet("build-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "module root `dir` (default: the module of the working directory)")
	tag := fs.String("tag", cmp.Or(images.TagFromEnv(os.Getenv), "local"), "image `tag` (default $MESH_IMAGE_TAG, else local)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: build-images [flags] [image ...]\n\n"+
			"Builds the images (default all: %s) when missing or stale.\n\nFlags:\n", strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	specs, drivers, broker, store, netem := all, nodeDrivers, true, true, true
	if fs.NArg() > 0 {
		specs, drivers, broker, store, netem = nil, nil, false, false, false
		for _, name := range fs.Args() {
			if i := slices.IndexFunc(nodeDrivers, func(impl conformance.Implementation) bool { return images.DriverName(impl.Name) == name }); i >= 0 {
				drivers = append(drivers, nodeDrivers[i])
				continue
			}
			if name == rabbitmqImage {
				broker = true
				continue
			}
			if name == postgresImage {
				store = true
				continue
			}
			if name == netemImage {
				netem = true
				continue
			}
			i := slices.IndexFunc(all, func(s images.Spec) bool { return s.Name == name })
			if i < 0 {
				fmt.Fprintf(stderr, "build-images: unknown image %q (known: %s)\n", name, strings.Join(names, ", "))
				return 2
			}
			specs = append(specs, all[i])
		}
	}
	if *root == "" {
		r, err := moduleRoot(ctx)
		if err != nil {
			log.Error("find module root", "err", err)
			return 1
		}
		*root = r
	}

	b := &images.Builder{Root: *root, Out: stdout, Tag: *tag}
	defer b.Close()
	start := time.Now()
	refs, err := b.EnsureAll(ctx, specs...)
	if err != nil {
		log.Error("build images", "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
		return 1
	}
	ready := make([]string, 0, len(refs)+1)
	for _, ref := range refs {
		ready = append(ready, ref)
	}
	for _, impl := range drivers {
		ref, err := b.EnsureDriver(ctx, impl, images.DebianFromEnv(os.Getenv))
		if err != nil {
			log.Error("build the driver image of "+impl.Name, "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
			return 1
		}
		ready = append(ready, ref)
	}
	if broker {
		ref, err := rabbitmq.EnsureImage(ctx, b, os.Getenv(rabbitmq.EnvImage), images.DebianFromEnv(os.Getenv))
		if err != nil {
			log.Error("build the rabbitmq image", "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
			return 1
		}
		ready = append(ready, ref)
	}
	if store {
		ref, err := postgres.EnsureImage(ctx, b, os.Getenv(postgres.EnvImage), images.DebianFromEnv(os.Getenv))
		if err != nil {
			log.Error("build the postgres image", "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
			return 1
		}
		ready = append(ready, ref)
	}
	if netem {
		ref, err := b.EnsureDebian(ctx, images.Netem(images.DebianFromEnv(os.Getenv)))
		if err != nil {
			log.Error("build the netem helper image", "err", err, "infrastructure", errors.Is(err, images.ErrInfrastructure))
			return 1
		}
		ready = append(ready, ref)
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
