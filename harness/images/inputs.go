package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// recipe versions how Builder turns inputs into an image (build flags,
// Dockerfile shape). Bump it when that changes, so existing images whose
// sources did not change are rebuilt anyway.
const recipe = "scratch/v1 CGO_ENABLED=0 -trimpath -ldflags=-s -w"

// Inputs is everything an image's content depends on.
type Inputs struct {
	// GoVersion is the toolchain that builds the binaries (go env GOVERSION).
	GoVersion string
	// Platform is the target, e.g. linux/amd64.
	Platform string
	// Spec is the image's description; its command line is in the image.
	Spec Spec
	// Files are paths relative to the module root: go.mod, go.sum and the
	// source files of every package of our module the binaries depend on.
	// Dependencies outside our module are pinned by go.sum.
	Files []string
}

// Digest is the hex sha256 of the inputs with the content of every file
// read from root. File order does not matter; names and contents do.
func (in Inputs) Digest(root string) (string, error) {
	h := sha256.New()
	spec, err := json.Marshal(in.Spec)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	fmt.Fprintf(h, "mesh image inputs\nrecipe %s\ngo %s\nplatform %s\nspec %s\n",
		recipe, in.GoVersion, in.Platform, spec)
	files := slices.Clone(in.Files)
	slices.Sort(files)
	files = slices.Compact(files)
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", fmt.Errorf("hash inputs: %w", err)
		}
		// Length-prefixed, so no two file sets can run together into the
		// same byte stream.
		fmt.Fprintf(h, "file %q %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// listedPackage is the part of `go list -json` output we read.
type listedPackage struct {
	ImportPath string
	Dir        string
	Module     *struct {
		Path string
		Main bool
	}
	GoFiles, CgoFiles, CFiles, SFiles, HFiles, SysoFiles, EmbedFiles []string
	Error                                                            *struct{ Err string }
}

// goListFields limits go list's output to what listedPackage reads.
const goListFields = "ImportPath,Dir,Module,GoFiles,CgoFiles,CFiles,SFiles,HFiles,SysoFiles,EmbedFiles,Error"

// moduleFiles lists, relative to root, the build files of every package of
// the main module that pkgs depend on (pkgs included), as go list sees
// them for the target in env.
func moduleFiles(ctx context.Context, goCmd, root string, env []string, pkgs []string) ([]string, error) {
	args := append([]string{"list", "-deps", "-json=" + goListFields}, pkgs...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(pkgs, " "), err, strings.TrimSpace(stderr.String()))
	}
	files := []string{"go.mod"}
	// A module without dependencies has no go.sum.
	if _, err := os.Stat(filepath.Join(root, "go.sum")); err == nil {
		files = append(files, "go.sum")
	}
	dec := json.NewDecoder(&stdout)
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		for _, group := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.SFiles, p.HFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range group {
				rel, err := filepath.Rel(root, filepath.Join(p.Dir, f))
				if err != nil || strings.HasPrefix(rel, "..") {
					return nil, fmt.Errorf("list files: %s of %s lies outside %s", f, p.ImportPath, root)
				}
				files = append(files, rel)
			}
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// goVersion asks the toolchain that will build, not the one running us.
func goVersion(ctx context.Context, goCmd, root string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "env", "GOVERSION")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
