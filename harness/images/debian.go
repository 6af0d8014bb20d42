package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// debianRecipe versions how EnsureDebian turns a DebianSpec into an image
// (mmdebstrap's flags, the hooks, docker import). Bump it when that
// changes, so that images whose spec did not change are rebuilt anyway.
const debianRecipe = "mmdebstrap/v1 variant=essential merged-usr force-unsafe-io import"

// DefaultDebianSuite is the release images are built from. The mirrors
// are this machine's apt's (MirrorsFromApt), passed to mmdebstrap
// explicitly so that a build does not depend on mmdebstrap's guesses.
const DefaultDebianSuite = "bookworm"

// Environment variables DebianFromEnv reads, for a machine that must use
// another mirror (a local proxy or a snapshot).
const (
	EnvDebianMirror         = "MESH_DEBIAN_MIRROR"
	EnvDebianSecurityMirror = "MESH_DEBIAN_SECURITY_MIRROR"
)

// Debian says where packages come from. It is part of an image's inputs:
// another mirror is another recipe, and rebuilds.
type Debian struct {
	// Suite is the release, e.g. bookworm. Its -updates and -security
	// suites are used too.
	Suite string
	// Mirror is the archive of Suite and Suite-updates.
	Mirror string
	// SecurityMirror is the archive of Suite-security.
	SecurityMirror string
}

// DebianFromEnv is the default suite with the mirrors named by
// EnvDebianMirror and EnvDebianSecurityMirror, where set, and else the
// ones this machine's apt uses (under AptDir). getenv is os.Getenv, or a
// map's lookup in a test.
func DebianFromEnv(getenv func(string) string) Debian {
	d := Debian{Suite: DefaultDebianSuite, Mirror: getenv(EnvDebianMirror), SecurityMirror: getenv(EnvDebianSecurityMirror)}
	mirror, security := MirrorsFromApt(AptDir, d.Suite)
	if d.Mirror == "" {
		d.Mirror = mirror
	}
	if d.SecurityMirror == "" {
		d.SecurityMirror = security
	}
	return d
}

// withDefaults fills an empty suite.
func (d Debian) withDefaults() Debian {
	if d.Suite == "" {
		d.Suite = DefaultDebianSuite
	}
	return d
}

// checkMirrors refuses a Debian without its archives, saying where they
// are looked for.
func (d Debian) checkMirrors() error {
	d = d.withDefaults()
	if d.Mirror == "" || d.SecurityMirror == "" {
		return fmt.Errorf("no Debian archive for %s (and %s-security): this machine's apt names none under %s; set %s and %s",
			d.Suite, d.Suite, AptDir, EnvDebianMirror, EnvDebianSecurityMirror)
	}
	return nil
}

// Sources are the one-line apt sources mmdebstrap is given: the suite,
// its updates and its security updates, main only.
func (d Debian) Sources() []string {
	d = d.withDefaults()
	return []string{
		fmt.Sprintf("deb %s %s main", d.Mirror, d.Suite),
		fmt.Sprintf("deb %s %s-updates main", d.Mirror, d.Suite),
		fmt.Sprintf("deb %s %s-security main", d.SecurityMirror, d.Suite),
	}
}

// RootFile is a file written into the root filesystem after the packages
// are installed, owned by root with mode 0644.
type RootFile struct {
	// Path is absolute, inside the image.
	Path string
	// Body is the content.
	Body string
}

// DebianSpec describes an image made of Debian packages: a root
// filesystem built by mmdebstrap (variant essential, so a shell and
// coreutils but no apt) and imported into Docker.
type DebianSpec struct {
	// Name is the repository name; the image is tagged <Name>:<Builder.Tag>.
	Name string
	// Debian is the suite and the mirrors.
	Debian Debian
	// Packages are installed with their dependencies (mmdebstrap --include).
	Packages []string
	// Files are written after the packages are installed, so they win over
	// the packages' own.
	Files []RootFile
	// Binaries are static Go programs built from the checkout as Spec's
	// are (Builder.Root must be set) and installed root-owned, mode 0755,
	// as /usr/local/bin/<Name>. Their Go inputs are part of the image's.
	Binaries []Binary `json:",omitempty"`
	// Prune keeps in a directory only the entries the image uses, before
	// Remove.
	Prune []Prune `json:",omitempty"`
	// Prepare are commands run in the image's root (chroot) after its
	// files and binaries are in place and before Remove: work that every
	// container's first start would otherwise repeat, done once at build
	// time (mesh-postgres's cluster, which initdb made in each container).
	Prepare []Command `json:",omitempty"`
	// Remove are absolute paths removed last: documentation the image
	// does not need, secrets a package's postinst made at build time.
	Remove []string
	// Env are KEY=value pairs of the image's environment.
	Env []string
	// User runs the entrypoint; empty is root.
	User string
	// Entrypoint and Cmd are in exec form.
	Entrypoint []string
	Cmd        []string
	// Expose are ports like 5672/tcp.
	Expose []string
	// Volumes are directories each container of the image keeps on a
	// volume of its own (Dockerfile VOLUME), off the container's layer:
	// where a server writes much (a database's files), since the layer
	// may be a FUSE filesystem that costs every write a round trip
	// through a process of its own. A new volume starts with what the
	// image has there, owner included; it lives as long as its
	// container, through stops and starts.
	Volumes []string `json:",omitempty"`
}

// Command is a program run as User (empty: root) in the image's root,
// with only Env as its environment (and a PATH, unless Env has one).
type Command struct {
	User string `json:",omitempty"`
	Env  []string
	Args []string
}

// Prune keeps, in each directory Dir names, only the entries Keep names,
// each as it is or followed by "-" and a version ("rabbit" keeps
// rabbit-3.10.8): what a package installs that the image does not use and
// that costs it at run time (RabbitMQ looks for every module it loads in
// every plugin's code directory, and its boot takes twice as long with
// all of them). Dir may hold "*" where a package puts a version; the
// build fails when it matches no directory, or when one it matches lacks
// an entry Keep names, so a package that moved its files cannot leave an
// image that boots without what it needs.
type Prune struct {
	Dir  string
	Keep []string
}

// check refuses a spec that could not make a usable image, or whose
// values would not survive docker import's Dockerfile-line syntax.
func (s DebianSpec) check() error {
	bins := s.Binaries
	if len(bins) == 0 {
		bins = []Binary{{Package: "-", Name: "-"}}
	}
	if err := (Spec{Name: s.Name, Binaries: bins}).check(); err != nil {
		return err
	}
	bad := func(what, v string) error { return fmt.Errorf("check spec %s: bad %s %q", s.Name, what, v) }
	for _, p := range s.Packages {
		if p == "" || strings.ContainsAny(p, ", \t\n'\"") {
			return bad("package", p)
		}
	}
	for _, f := range s.Files {
		if !absClean(f.Path) {
			return bad("file path", f.Path)
		}
	}
	for _, b := range s.Binaries {
		if !absClean(binaryPath(b)) {
			return bad("binary name", b.Name)
		}
	}
	for _, p := range s.Prune {
		if !absClean(strings.ReplaceAll(p.Dir, "*", "x")) || p.Dir == "/" || len(p.Keep) == 0 {
			return bad("directory to prune", p.Dir)
		}
		for _, k := range p.Keep {
			if !plainName(k) {
				return bad("entry to keep", k)
			}
		}
	}
	for _, c := range s.Prepare {
		if len(c.Args) == 0 || (c.User != "" && !plainName(c.User)) {
			return bad("command to prepare with", strings.Join(c.Args, " "))
		}
		for _, e := range c.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return bad("command's environment entry", e)
			}
		}
	}
	for _, r := range s.Remove {
		if !absClean(r) || r == "/" {
			return bad("path to remove", r)
		}
	}
	for _, e := range s.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.ContainsAny(e, " \t\n'\"\\$") {
			return bad("environment entry", e)
		}
	}
	if strings.ContainsAny(s.User, " \t\n") {
		return bad("user", s.User)
	}
	for _, v := range s.Volumes {
		if !absClean(v) || v == "/" {
			return bad("volume", v)
		}
	}
	for _, p := range s.Expose {
		if p == "" || strings.ContainsAny(p, " \t\n") {
			return bad("port", p)
		}
	}
	if len(s.Entrypoint) == 0 && len(s.Cmd) == 0 {
		return fmt.Errorf("check spec %s: no entrypoint and no command", s.Name)
	}
	return nil
}

// absClean says whether p is an absolute, clean path that a shell word
// and mmdebstrap's special hooks (split on blanks) hold without surprises.
func absClean(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, " \t\n'\"\\$`*?[")
}

// plainName says whether s is a name of lower-case letters, digits and
// underscores, which a shell pattern holds as it is.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// binaryPath is where a DebianSpec's binary is installed.
func binaryPath(b Binary) string { return "/usr/local/bin/" + b.Name }

// debianDigest is the hex sha256 of what the image's content depends on:
// the recipe, the target architecture, the spec with its mirrors made
// explicit and, when it has binaries, binaries: the Inputs digest of
// their Go sources ("" when it has none). Package versions are not in it:
// a rebuild takes the newest the mirror has, and a stable suite only
// moves by point and security releases.
func debianDigest(s DebianSpec, arch, binaries string) (string, error) {
	s.Debian = s.Debian.withDefaults()
	spec, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "mesh debian image inputs\nrecipe %s\narch %s\nspec %s\n", debianRecipe, arch, spec)
	if binaries != "" {
		fmt.Fprintf(h, "binaries %s\n", binaries)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// changes are the Dockerfile lines docker import applies to the root
// filesystem: the spec's runtime settings and our labels.
func (s DebianSpec) changes(labels map[string]string) ([]string, error) {
	var out []string
	for _, e := range s.Env {
		out = append(out, "ENV "+e)
	}
	if s.User != "" {
		out = append(out, "USER "+s.User)
	}
	for _, p := range s.Expose {
		out = append(out, "EXPOSE "+p)
	}
	for _, v := range s.Volumes {
		out = append(out, "VOLUME "+v)
	}
	exec, err := execForm(s.Entrypoint, s.Cmd)
	if err != nil {
		return nil, err
	}
	out = append(out, exec...)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		// JSON quoting is valid Dockerfile quoting for these values.
		v, err := json.Marshal(labels[k])
		if err != nil {
			return nil, fmt.Errorf("encode label %s: %w", k, err)
		}
		out = append(out, "LABEL "+k+"="+string(v))
	}
	return out, nil
}

// shellQuote makes s one word for sh, for the hooks mmdebstrap runs with
// sh -c.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
