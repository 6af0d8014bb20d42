package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// mergedUsrHooks is the hook directory of Debian's mmdebstrap package that
// sets up merged /usr with the usr-is-merged package. Without it apt
// satisfies init-system-helpers with usrmerge, which drags perl (40 MB)
// into the image.
const mergedUsrHooks = "/usr/share/mmdebstrap/hooks/merged-usr"

// importer is the part of the Docker API EnsureDebian needs beyond engine;
// the moby client implements it.
type importer interface {
	engine
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
}

// EnsureDebian makes sure the image of s exists with the label of its
// current recipe, building it if it is missing or stale, and returns its
// reference. A build runs mmdebstrap (which must be installed: apt-get
// install mmdebstrap) against the spec's mirrors and imports the root
// filesystem with docker import; nothing is pulled from a registry.
func (b *Builder) EnsureDebian(ctx context.Context, s DebianSpec) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := b.Ref(Spec{Name: s.Name})
	if b.Once.has(b.Root, ref) {
		return ref, nil
	}
	if err := s.check(); err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}
	if err := s.Debian.checkMirrors(); err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, infra(err))
	}
	var root, binaries string
	if len(s.Binaries) > 0 {
		if b.Root == "" {
			return "", fmt.Errorf("ensure %s: its binaries are built from the checkout, and the builder has no Root", ref)
		}
		var err error
		if root, err = filepath.Abs(b.Root); err != nil {
			return "", fmt.Errorf("ensure %s: %w", ref, err)
		}
		// The Go inputs are hashed as Ensure hashes them; their Spec
		// names only the binaries, the rest of the image is s.
		if binaries, err = b.digest(ctx, root, Spec{Name: s.Name, Binaries: s.Binaries}); err != nil {
			return "", fmt.Errorf("ensure %s: %w", ref, infra(err))
		}
	}
	digest, err := debianDigest(s, runtime.GOARCH, binaries)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}
	eng, err := b.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("ensure %s: %w", ref, err)
	}
	docker, ok := eng.(importer)
	if !ok {
		return "", fmt.Errorf("ensure %s: %w", ref, infra(errors.New("the Docker client cannot import images")))
	}

	return b.ensureLabelled(ctx, docker, ref, digest, "recipe changed", func(reason string) (string, error) {
		b.printf("building %s from Debian %s packages (%s) …\n", ref, s.Debian.withDefaults().Suite, reason)
		return b.buildDebian(ctx, docker, s, root, ref, digest)
	})
}

// mmdebstrap finds the tool, installing it from Debian's packages when it
// is missing and this process may (root, apt-get present): the README's
// commands are set-up free on a fresh machine of this kind.
func (b *Builder) mmdebstrap(ctx context.Context) (string, error) {
	if mm, err := exec.LookPath("mmdebstrap"); err == nil {
		return mm, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		return "", errors.New("find mmdebstrap: not installed, and this process cannot install it (as root: apt-get install mmdebstrap)")
	}
	b.printf("  installing mmdebstrap (apt-get install mmdebstrap) …\n")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "mmdebstrap"}} {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("install mmdebstrap: apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return exec.LookPath("mmdebstrap")
}

// buildDebian makes the root filesystem in a temporary directory and
// imports it. The tarball goes through a file, not a pipe: a pipe would
// hand docker import a truncated but well-formed tar when mmdebstrap
// fails half-way.
func (b *Builder) buildDebian(ctx context.Context, docker importer, s DebianSpec, root, ref, digest string) (string, error) {
	mm, err := b.mmdebstrap(ctx)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(mergedUsrHooks); err != nil {
		return "", fmt.Errorf("find mmdebstrap's merged-usr hooks: %w", err)
	}
	dir, err := os.MkdirTemp("", "mesh-debian-")
	if err != nil {
		return "", fmt.Errorf("make build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	for i, f := range s.Files {
		if err := os.WriteFile(filepath.Join(dir, "file"+strconv.Itoa(i)), []byte(f.Body), 0o644); err != nil {
			return "", fmt.Errorf("stage %s: %w", f.Path, err)
		}
	}
	for i, bin := range s.Binaries {
		if err := b.goBuild(ctx, root, s.Name, bin, filepath.Join(dir, "bin"+strconv.Itoa(i))); err != nil {
			return "", err
		}
	}

	start := time.Now()
	tarball := filepath.Join(dir, "rootfs.tar")
	out := &mmdebstrapLog{out: b.Out, name: s.Name}
	cmd := exec.CommandContext(ctx, mm, mmdebstrapArgs(s, dir, b.debianCache(s.Name), tarball)...)
	cmd.Stdout, cmd.Stderr = out, out
	// On cancel, SIGTERM first: mmdebstrap then unmounts what it mounted
	// in the chroot (root mode) and removes its temporary tree, which a
	// SIGKILL would leave behind.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("mmdebstrap %s: %w", s.Name, ctx.Err())
		}
		return "", fmt.Errorf("mmdebstrap %s: %w\n%s", s.Name, err, out.Tail())
	}
	b.printf("  %s: mmdebstrap … %.1fs\n", s.Name, time.Since(start).Seconds())

	start = time.Now()
	id, err := importRootfs(ctx, docker, tarball, s, ref, map[string]string{LabelInputs: digest, LabelImage: s.Name})
	if err != nil {
		return "", err
	}
	b.printf("  %s: docker import … %.1fs\n", s.Name, time.Since(start).Seconds())
	return id, nil
}

// mmdebstrapArgs is the command line building s into target, with the
// files of s staged in dir as file0, file1 … and its binaries as bin0,
// bin1 … . With a cache directory the
// downloaded packages are kept there between builds (only those of the
// last build, so it does not grow): a rebuild after a change of
// configuration then downloads nothing but the package lists.
func mmdebstrapArgs(s DebianSpec, dir, cache, target string) []string {
	args := []string{
		"--variant=essential",
		"--hook-dir=" + mergedUsrHooks,
		// Half the build time otherwise goes to fsync in dpkg; the tree is
		// thrown away if the build fails.
		"--dpkgopt=force-unsafe-io",
	}
	if len(s.Packages) > 0 {
		args = append(args, "--include="+strings.Join(s.Packages, ","))
	}
	if cache != "" {
		archives := "/var/cache/apt/archives"
		args = append(args,
			"--skip=download/empty",
			// Keep the essential packages' files in the archive too, so
			// that they reach the cache.
			"--skip=essential/unlink",
			`--setup-hook=mkdir -p "$1"`+archives,
			"--setup-hook=sync-in "+cache+" "+archives,
			"--customize-hook=find "+shellQuote(cache)+" -maxdepth 1 -type f -name '*.deb' -delete",
			"--customize-hook=sync-out "+archives+" "+cache,
		)
	}
	var dirs []string
	for _, f := range s.Files {
		if d := path.Dir(f.Path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, bin := range s.Binaries {
		if d := path.Dir(binaryPath(bin)); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		args = append(args, `--customize-hook=mkdir -p "$1"`+shellQuote(d))
	}
	for i, f := range s.Files {
		args = append(args,
			"--customize-hook=upload "+filepath.Join(dir, "file"+strconv.Itoa(i))+" "+f.Path,
			`--customize-hook=chmod 0644 "$1"`+shellQuote(f.Path))
	}
	for i, bin := range s.Binaries {
		p := binaryPath(bin)
		args = append(args,
			"--customize-hook=upload "+filepath.Join(dir, "bin"+strconv.Itoa(i))+" "+p,
			`--customize-hook=chmod 0755 "$1"`+shellQuote(p))
	}
	for _, p := range s.Prune {
		args = append(args, "--customize-hook="+pruneHook(p))
	}
	for _, c := range s.Prepare {
		args = append(args, "--customize-hook="+prepareHook(c))
	}
	if len(s.Remove) > 0 {
		rm := "rm -rf"
		for _, r := range s.Remove {
			rm += ` "$1"` + shellQuote(r)
		}
		args = append(args, "--customize-hook="+rm)
	}
	args = append(args, s.Debian.withDefaults().Suite, target)
	return append(args, s.Debian.Sources()...)
}

// prepareHook is the shell of a customize hook running c chrooted in the
// root filesystem "$1", as c.User through runuser (util-linux, in every
// Debian root), with nothing of the builder's environment but what c
// gives.
func prepareHook(c Command) string {
	cmd := `chroot "$1"`
	if c.User != "" {
		cmd += " runuser -u " + shellQuote(c.User) + " --"
	}
	cmd += " env -i"
	if !slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		cmd += " PATH=/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, w := range slices.Concat(c.Env, c.Args) {
		cmd += " " + shellQuote(w)
	}
	return cmd
}

// pruneHook is the shell of a customize hook applying p in the root
// filesystem "$1": p.Dir's "*" is left to the shell to expand, the rest
// quoted.
func pruneHook(p Prune) string {
	var keep, check []string
	for _, k := range p.Keep {
		keep = append(keep, k, k+"-[0-9]*")
		check = append(check, k)
	}
	dir := `"$1"` + strings.Join(quoteAround(p.Dir, "*"), "*")
	return "set -e; n=0; for d in " + dir + "; do [ -d \"$d\" ] || continue; n=$((n+1)); " +
		"for e in \"$d\"/*; do case \"${e##*/}\" in " + strings.Join(keep, "|") + `) ;; *) rm -rf "$e";; esac; done; ` +
		"for k in " + strings.Join(check, " ") + `; do f=; for x in "$d/$k" "$d/$k"-[0-9]*; do [ -e "$x" ] && f=1; done; [ -n "$f" ] || { echo "prune: no $k in $d" >&2; exit 1; }; done; done; ` +
		`[ $n -gt 0 ] || { echo "prune: no directory ` + p.Dir + `" >&2; exit 1; }`
}

// quoteAround splits s at sep and shell-quotes each part.
func quoteAround(s, sep string) []string {
	parts := strings.Split(s, sep)
	for i, p := range parts {
		if p != "" {
			parts[i] = shellQuote(p)
		}
	}
	return parts
}

// debianCache is the directory keeping the packages of the image name
// between builds, or "" when there is none to be had. One per image, so
// that keeping only the last build's packages does not empty another's.
func (b *Builder) debianCache(name string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir := filepath.Join(base, "mesh", "debian", name)
	// mmdebstrap splits a special hook's arguments on blanks.
	if strings.ContainsAny(dir, " \t\n'\"") {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return dir
}

// importRootfs imports the tarball as ref with the runtime settings of s
// and labels, and checks that the engine kept the labels (they are how the
// next Ensure knows the image).
func importRootfs(ctx context.Context, docker importer, tarball string, s DebianSpec, ref string, labels map[string]string) (string, error) {
	changes, err := s.changes(labels)
	if err != nil {
		return "", err
	}
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("open root filesystem: %w", err)
	}
	defer f.Close()
	repo, tag, _ := strings.Cut(ref, ":")
	res, err := docker.ImageImport(ctx, client.ImageImportSource{Source: f, SourceName: "-"}, repo,
		client.ImageImportOptions{Tag: tag, Changes: changes, Message: "mesh: " + s.Name + " from Debian packages"})
	if err != nil {
		return "", fmt.Errorf("docker import %s: %w", ref, err)
	}
	id, err := readImportStream(res)
	res.Close()
	if err != nil {
		return "", fmt.Errorf("docker import %s: %w", ref, err)
	}
	img, err := docker.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect imported image %s: %w", ref, err)
	}
	if img.Config == nil || img.Config.Labels[LabelInputs] != labels[LabelInputs] {
		return "", fmt.Errorf("docker import %s: the engine dropped the label %s", ref, LabelInputs)
	}
	if id == "" {
		id = img.ID
	}
	return id, nil
}

// readImportStream drains the engine's answer to an import: JSON messages
// whose last status is the image ID, or an error.
func readImportStream(r io.Reader) (string, error) {
	var id string
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return id, nil
		} else if err != nil {
			return "", fmt.Errorf("read import output: %w", err)
		}
		if m.Error != "" {
			return "", errors.New(m.Error)
		}
		if m.ErrorDetail != nil {
			return "", errors.New(m.ErrorDetail.Message)
		}
		if strings.HasPrefix(m.Status, "sha256:") {
			id = strings.TrimSpace(m.Status)
		}
	}
}

// mmdebstrapLog keeps the last lines of mmdebstrap's output for an error
// and passes its phase lines ("I: extracting archives...") to out, so a
// build of a minute or two is not silent.
type mmdebstrapLog struct {
	out io.Writer
	// name is the image's, before each line: the Go images are built
	// beside it, their lines between its own.
	name    string
	partial []byte
	tail    []string
}

func (l *mmdebstrapLog) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(l.partial[:i]), "\r")
		l.partial = l.partial[i+1:]
		l.tail = append(l.tail, line)
		if len(l.tail) > 20 {
			l.tail = l.tail[1:]
		}
		if l.out != nil && isPhase(line) {
			if l.name != "" {
				say(l.out, "  %s: %s\n", l.name, line)
			} else {
				say(l.out, "  %s\n", line)
			}
		}
	}
	return len(p), nil
}

// Tail is the last lines mmdebstrap wrote.
func (l *mmdebstrapLog) Tail() string {
	lines := l.tail
	if len(l.partial) > 0 {
		lines = append(lines, string(l.partial))
	}
	return strings.Join(lines, "\n")
}

// isPhase says whether a line of mmdebstrap's output is worth narrating.
func isPhase(line string) bool {
	for _, p := range []string{"I: downloading", "I: extracting", "I: installing", "I: creating tarball", "I: success"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}
