package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/meshbus/mesh/conformance"
)

// DriverName is the image name of an implementation's conformance driver,
// whatever its recipe.
func DriverName(implementation string) string { return "mesh-driver-" + implementation }

// Driver is the image of an implementation's conformance driver written
// in Go (docs/conformance.md): the package pkg as /driver.
func Driver(implementation, pkg string) Spec {
	return Spec{
		Name:       DriverName(implementation),
		Binaries:   []Binary{{Package: pkg, Name: "driver"}},
		Entrypoint: []string{"/driver"},
	}
}

// NodeSDKDir is where a Node.js driver's image holds its SDK: the SDK's
// directory in the checkout with its slashes made dashes (mesh/sdk-js is
// /opt/mesh-sdk-js).
func NodeSDKDir(sdk string) string { return "/opt/" + strings.ReplaceAll(sdk, "/", "-") }

// NodeDriver is the image of an implementation's conformance driver
// written for Node.js (docs/conformance.md): Debian's nodejs, which runs
// program (a script inside the SDK's directory sdk) with the command's
// arguments after it. Beside it are the SDK's package.json (which makes
// the scripts ES modules) and every .js under the SDK's src and under the
// program's directory, read from the checkout at root now, so that their
// content is part of the image's inputs: a changed script rebuilds it.
func NodeDriver(d Debian, root, implementation, sdk, program string) (DebianSpec, error) {
	if !strings.HasPrefix(path.Dir(program), sdk+"/") {
		return DebianSpec{}, fmt.Errorf("node driver %s: its program %s is not in a directory inside the SDK's (%s)", implementation, program, sdk)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(program))); err != nil {
		return DebianSpec{}, fmt.Errorf("node driver %s: its program is not in the checkout: %w", implementation, err)
	}
	into := NodeSDKDir(sdk)
	files := []RootFile{}
	seen := map[string]bool{}
	add := func(rel string) error {
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		files = append(files, RootFile{Path: into + strings.TrimPrefix(rel, sdk), Body: string(b)})
		return nil
	}
	if err := add(sdk + "/package.json"); err != nil {
		return DebianSpec{}, fmt.Errorf("node driver %s: %w", implementation, err)
	}
	for _, dir := range []string{sdk + "/src", path.Dir(program)} {
		err := fs.WalkDir(os.DirFS(root), dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() || path.Ext(p) != ".js" {
				return err
			}
			return add(p)
		})
		if err != nil {
			return DebianSpec{}, fmt.Errorf("node driver %s: %w", implementation, err)
		}
	}
	return DebianSpec{
		Name:     DriverName(implementation),
		Debian:   d,
		Packages: []string{"nodejs"},
		Files:    files,
		Remove:   []string{"/usr/share/doc", "/usr/share/man", "/usr/share/info"},
		Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		// Debian's node, never one on a PATH: the bed checks the SDK on
		// the Node the distribution ships (18 on bookworm).
		Entrypoint: []string{"/usr/bin/node", into + strings.TrimPrefix(program, sdk)},
	}, nil
}

// EnsureDriver builds the image of impl's conformance driver by its
// registry recipe when it is missing or stale, and returns its reference:
// a Go package into a scratch image (Driver), a Node.js program into an
// image of Debian's nodejs from d's archives (NodeDriver, read from Root).
func (b *Builder) EnsureDriver(ctx context.Context, impl conformance.Implementation, d Debian) (string, error) {
	if impl.Node == "" {
		return b.Ensure(ctx, Driver(impl.Name, impl.Driver))
	}
	if ref := b.Ref(Spec{Name: DriverName(impl.Name)}); b.Once.has(b.Root, ref) {
		return ref, nil
	}
	if b.Root == "" {
		return "", errors.New("ensure " + DriverName(impl.Name) + ": its scripts are read from the checkout, and the builder has no Root")
	}
	root, err := filepath.Abs(b.Root)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", DriverName(impl.Name), err)
	}
	s, err := NodeDriver(d, root, impl.Name, impl.SDK, impl.Node)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", DriverName(impl.Name), err)
	}
	return b.EnsureDebian(ctx, s)
}
