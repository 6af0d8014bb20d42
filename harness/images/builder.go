package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Labels set on every image Builder makes.
const (
	// LabelInputs holds the Inputs digest the image was built from.
	LabelInputs = "mesh.inputs"
	// LabelImage names the Spec, so our images can be found by label.
	LabelImage = "mesh.image"
)

// engine is the part of the Docker API Builder uses; the moby client
// implements it.
type engine interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error)
	ImageRemove(ctx context.Context, image string, opts client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	Close() error
}

// Builder ensures images exist and match the checkout. Set Root; the rest
// has defaults. A Builder may be used from several goroutines, but builds
// are serialised: the machine is small and go build is parallel already.
type Builder struct {
	// Root is the module root (the directory holding go.mod).
	Root string
	// Out receives one progress line per step; nil discards them.
	Out io.Writer
	// Tag is the tag of every image; default "local" (TagFromEnv lets two
	// checkouts on one machine keep images of their own).
	Tag string
	// GOARCH is the target architecture; default the one we run on.
	GOARCH string
	// GoCmd is the go command; default "go" from PATH.
	GoCmd string
	// Once, when set, is the run's record of the images it has made sure
	// of, shared by its builders: an image ensured once is taken as it is
	// after that, without reading the checkout again (go list and a
	// digest of every input, a core-second a cluster). Every cluster of a
	// run is then raised from the same images, and an input changed
	// during the run is built by the next one.
	Once *Ensured

	mu        sync.Mutex
	docker    engine
	goVersion string
}

// EnvTag names the tag the harness and the image commands give every image
// they build, instead of "local": two checkouts on one machine (a worktree
// beside main) then keep images of their own rather than rebuilding each
// other's in turn.
const EnvTag = "MESH_IMAGE_TAG"

// TagFromEnv is the tag EnvTag asks for, or "" (the default); getenv is
// os.Getenv, or a stand-in in tests.
func TagFromEnv(getenv func(string) string) string { return getenv(EnvTag) }

// Ref is the image reference Ensure returns for s, e.g. mesh-nats:local.
func (b *Builder) Ref(s Spec) string {
	tag := b.Tag
	if tag == "" {
		tag = "local"
	}
	return s.Name + ":" + tag
}

// Sibling is a builder with b's settings and a lock and a Docker client
// of its own, to build beside b: a builder makes one build at a time.
// Close it when done.
func (b *Builder) Sibling() *Builder {
	return &Builder{Root: b.Root, Out: b.Out, Tag: b.Tag, GOARCH: b.GOARCH, GoCmd: b.GoCmd, Once: b.Once}
}

// Close releases the Docker client, if one was made.
func (b *Builder) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.docker == nil {
		return nil
	}
	err := b.docker.Close()
	b.docker = nil
	return err
}

// EnsureAll ensures every spec in turn and returns name → reference for
// those that succeeded. It goes on past a failure, so one broken image does
// not hide the state of the others; the errors are joined.
func (b *Builder) EnsureAll(ctx context.Context, specs ...Spec) (map[string]string, error) {
	refs := make(map[string]string, len(specs))
	var errs []error
	for _, s := range specs {
		ref, err := b.Ensure(ctx, s)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		refs[s.Name] = ref
	}
	return refs, errors.Join(errs...)
}

// Ensure makes sure the image of s exists with the label of the current
// inputs, building it if it is missing or stale, and returns its reference.
func (b *Builder) Ensure(ctx context.Context, s Spec) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := b.Ref(s)
	if b.Once.has(b.Root, ref) {
		return ref, nil
	}
	if err := s.check(); err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}
	root, err := filepath.Abs(b.Root)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}
	digest, err := b.digest(ctx, root, s)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, infra(err))
	}
	docker, err := b.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}

	return b.ensureLabelled(ctx, docker, ref, digest, "inputs changed", func(reason string) (string, error) {
		b.printf("building %s (%s) …\n", ref, reason)
		return b.build(ctx, docker, root, s, ref, digest)
	})
}

// ensureLabelled is what Ensure and EnsureDebian share: under the image's
// lock (another process may be building it), the image tagged ref is
// used as it is when its inputs label is digest; otherwise build makes it
// (told why: missing, or stale), and the image it replaced is removed.
func (b *Builder) ensureLabelled(ctx context.Context, docker engine, ref, digest, stale string, build func(reason string) (string, error)) (string, error) {
	unlock, err := lockImage(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, infra(err))
	}
	defer unlock()

	reason, oldID := "missing", ""
	cur, err := docker.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		oldID = cur.ID
		if cur.Config != nil && cur.Config.Labels[LabelInputs] == digest {
			b.printf("image %s up to date\n", ref)
			b.Once.add(b.Root, ref)
			return ref, nil
		}
		reason = stale
	case !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("ensure %s: inspect image: %w", ref, infra(err))
	}

	start := time.Now()
	id, err := build(reason)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, infra(err))
	}
	b.printf("built %s in %.1fs (%s)\n", ref, time.Since(start).Seconds(), shortID(id))
	b.Once.add(b.Root, ref)
	if oldID != "" && oldID != id {
		b.removeIfDangling(ctx, docker, oldID)
	}
	return ref, nil
}

// digest computes the inputs digest of s.
func (b *Builder) digest(ctx context.Context, root string, s Spec) (string, error) {
	in, err := b.inputs(ctx, root, s)
	if err != nil {
		return "", err
	}
	return in.Digest(root)
}

// inputs gathers the Inputs of s with go list.
func (b *Builder) inputs(ctx context.Context, root string, s Spec) (Inputs, error) {
	if b.goVersion == "" {
		v, err := goVersion(ctx, b.goCmd(), root)
		if err != nil {
			return Inputs{}, err
		}
		b.goVersion = v
	}
	pkgs := make([]string, len(s.Binaries))
	for i, bin := range s.Binaries {
		pkgs[i] = bin.Package
	}
	files, err := moduleFiles(ctx, b.goCmd(), root, b.buildEnv(root), pkgs)
	if err != nil {
		return Inputs{}, err
	}
	return Inputs{GoVersion: b.goVersion, Platform: "linux/" + b.goarch(), Spec: s, Files: files}, nil
}

// build compiles the binaries into a temporary context and builds the image.
func (b *Builder) build(ctx context.Context, docker engine, root string, s Spec, ref, digest string) (string, error) {
	dir, err := os.MkdirTemp("", "mesh-image-")
	if err != nil {
		return "", fmt.Errorf("make build context: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, bin := range s.Binaries {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, bin.Name)), 0o755); err != nil {
			return "", fmt.Errorf("make build context: %w", err)
		}
		if err := b.goBuild(ctx, root, s.Name, bin, filepath.Join(dir, bin.Name)); err != nil {
			return "", err
		}
	}
	start := time.Now()
	id, err := dockerBuild(ctx, docker, dir, s, ref, map[string]string{LabelInputs: digest, LabelImage: s.Name})
	if err != nil {
		return "", err
	}
	b.printf("  %s: docker build … %.1fs\n", s.Name, time.Since(start).Seconds())
	return id, nil
}

// goBuild builds bin as a static binary at dst, the way its inputs are
// hashed (buildEnv).
func (b *Builder) goBuild(ctx context.Context, root, image string, bin Binary, dst string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.goCmd(), "build", "-trimpath", "-ldflags=-s -w", "-o", dst, bin.Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), b.buildEnv(root)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", bin.Package, err, strings.TrimSpace(string(out)))
	}
	b.printf("  %s: go build %s … %.1fs\n", image, bin.Name, time.Since(start).Seconds())
	return nil
}

// removeIfDangling removes the image the new build replaced, unless it is
// still tagged elsewhere or used by a container; failing that is not worth
// failing the build for.
func (b *Builder) removeIfDangling(ctx context.Context, docker engine, id string) {
	old, err := docker.ImageInspect(ctx, id)
	if err != nil || len(old.RepoTags) > 0 {
		return
	}
	if _, err := docker.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
		b.printf("  kept previous image %s: %v\n", shortID(id), err)
		return
	}
	b.printf("  removed previous image %s\n", shortID(id))
}

// engine connects to Docker on first use, the way testcontainers-go does
// for the rest of the harness, so both talk to the same engine.
func (b *Builder) engine(ctx context.Context) (engine, error) {
	if b.docker != nil {
		return b.docker, nil
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, infra(fmt.Errorf("connect to docker: %w", err))
	}
	b.docker = cli
	return cli, nil
}

// buildEnv is the environment of go list and go build: static binaries
// for Linux, so that what is hashed is what is built.
func (b *Builder) buildEnv(root string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + b.goarch(), "PWD=" + root}
}

func (b *Builder) goarch() string {
	if b.GOARCH != "" {
		return b.GOARCH
	}
	return runtime.GOARCH
}

func (b *Builder) goCmd() string {
	if b.GoCmd != "" {
		return b.GoCmd
	}
	return "go"
}

func (b *Builder) printf(format string, args ...any) {
	if b.Out != nil {
		say(b.Out, format, args...)
	}
}

// outMu keeps the lines of builders building side by side (Sibling)
// whole: each line is written under it.
var outMu sync.Mutex

// say writes one or more whole lines to out.
func say(out io.Writer, format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(out, format, args...)
}

// check refuses a spec that could not make a usable image.
func (s Spec) check() error {
	if s.Name == "" || strings.ToLower(s.Name) != s.Name || strings.ContainsAny(s.Name, ":/@ ") {
		return fmt.Errorf("check spec: bad image name %q", s.Name)
	}
	if len(s.Binaries) == 0 {
		return fmt.Errorf("check spec %s: no binaries", s.Name)
	}
	seen := map[string]bool{}
	for _, bin := range s.Binaries {
		// A name is a relative, clean path: a file at the root, or in a
		// directory of the image (toolchain/sensor).
		if bin.Package == "" || bin.Name == "" || strings.ContainsAny(bin.Name, " \\") || bin.Name == "Dockerfile" ||
			path.IsAbs(bin.Name) || path.Clean(bin.Name) != bin.Name || strings.HasPrefix(bin.Name, "../") {
			return fmt.Errorf("check spec %s: bad binary %+v", s.Name, bin)
		}
		if seen[bin.Name] {
			return fmt.Errorf("check spec %s: binary name %q twice", s.Name, bin.Name)
		}
		seen[bin.Name] = true
	}
	return nil
}

// infra marks err as trouble of the machine rather than of the product,
// unless it already is.
func infra(err error) error {
	if errors.Is(err, ErrInfrastructure) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInfrastructure, err)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Ensured is a run's record of the images it has made sure of
// (Builder.Once), by checkout and reference. The zero value is empty and
// ready; it is safe for concurrent use, and a nil *Ensured records
// nothing.
type Ensured struct {
	mu   sync.Mutex
	refs map[string]bool
}

func (e *Ensured) has(root, ref string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refs[root+"\x00"+ref]
}

func (e *Ensured) add(root, ref string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs == nil {
		e.refs = map[string]bool{}
	}
	e.refs[root+"\x00"+ref] = true
}
