package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/internal/testutil"
)

func TestDebianSources(t *testing.T) {
	d := Debian{Mirror: "http://archive.example/debian", SecurityMirror: "http://archive.example/security"}
	want := []string{
		"deb http://archive.example/debian bookworm main",
		"deb http://archive.example/debian bookworm-updates main",
		"deb http://archive.example/security bookworm-security main",
	}
	if got := d.Sources(); !slices.Equal(got, want) {
		t.Fatalf("expected %q, got %q", want, got)
	}
	env := map[string]string{EnvDebianMirror: "http://mirror.local/debian", EnvDebianSecurityMirror: "http://mirror.local/security"}
	got := DebianFromEnv(func(k string) string { return env[k] }).Sources()
	if got[0] != "deb http://mirror.local/debian bookworm main" || got[2] != "deb http://mirror.local/security bookworm-security main" {
		t.Fatalf("expected the mirrors from %s and %s, got %q", EnvDebianMirror, EnvDebianSecurityMirror, got)
	}
	if err := (Debian{}).checkMirrors(); err == nil || !strings.Contains(err.Error(), EnvDebianMirror) {
		t.Fatalf("expected a Debian without archives refused, naming %s, got %v", EnvDebianMirror, err)
	}
}

func TestMirrorsFromApt(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sources.list.d/debian.sources", `Types: deb
# a comment
URIs: http://archive.example/debian/
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm-security

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main
`)
	write("sources.list.d/other.list", "deb [arch=amd64] http://other.example/repo stable main\n")
	mirror, security := MirrorsFromApt(dir, "bookworm")
	if mirror != "http://archive.example/debian" || security != "http://security.example/debian-security" {
		t.Fatalf("expected the deb archives of bookworm and bookworm-security, got %q and %q", mirror, security)
	}
	write("sources.list", "deb http://legacy.example/debian trixie main\n")
	if mirror, _ := MirrorsFromApt(dir, "trixie"); mirror != "http://legacy.example/debian" {
		t.Fatalf("expected the one-line source of trixie, got %q", mirror)
	}
	if mirror, security := MirrorsFromApt(t.TempDir(), "bookworm"); mirror != "" || security != "" {
		t.Fatalf("expected nothing from an empty apt directory, got %q, %q", mirror, security)
	}
}

func TestDebianDigest(t *testing.T) {
	base := RabbitMQ(Debian{})
	want, err := debianDigest(base, "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	explicit := base
	explicit.Debian.Suite = DefaultDebianSuite
	if got, _ := debianDigest(explicit, "amd64", ""); got != want {
		t.Errorf("spelling out the default suite changed the digest")
	}
	for name, change := range map[string]func(s *DebianSpec){
		"package":         func(s *DebianSpec) { s.Packages = append(s.Packages, "procps") },
		"config":          func(s *DebianSpec) { s.Files[0].Body += "heartbeat = 30\n" },
		"mirror":          func(s *DebianSpec) { s.Debian.Mirror = "http://mirror.local/debian" },
		"security mirror": func(s *DebianSpec) { s.Debian.SecurityMirror = "http://mirror.local/security" },
		"suite":           func(s *DebianSpec) { s.Debian.Suite = "trixie" },
		"environment":     func(s *DebianSpec) { s.Env = append(s.Env, "X=1") },
		"command":         func(s *DebianSpec) { s.Cmd = []string{"/bin/sh"} },
		"removed paths":   func(s *DebianSpec) { s.Remove = s.Remove[1:] },
		"pruned":          func(s *DebianSpec) { s.Prune[0].Keep = s.Prune[0].Keep[1:] },
		"binaries":        func(s *DebianSpec) { s.Binaries = []Binary{{Package: module + "/cmd/mesh-delay", Name: "mesh-delay"}} },
	} {
		s := RabbitMQ(Debian{})
		change(&s)
		if got, _ := debianDigest(s, "amd64", ""); got == want {
			t.Errorf("%s: expected the digest to change", name)
		}
	}
	if got, _ := debianDigest(base, "arm64", ""); got == want {
		t.Errorf("architecture: expected the digest to change")
	}
	if got, _ := debianDigest(base, "amd64", "abc"); got == want {
		t.Errorf("binaries' inputs: expected the digest to change")
	}
}

func TestDebianSpecCheck(t *testing.T) {
	if err := RabbitMQ(Debian{}).check(); err != nil {
		t.Fatalf("RabbitMQ: %v", err)
	}
	for name, change := range map[string]func(s *DebianSpec){
		"name":             func(s *DebianSpec) { s.Name = "Mesh:x" },
		"package list":     func(s *DebianSpec) { s.Packages = []string{"a,b"} },
		"relative file":    func(s *DebianSpec) { s.Files[0].Path = "etc/x" },
		"unclean file":     func(s *DebianSpec) { s.Files[0].Path = "/etc/../x" },
		"blank in file":    func(s *DebianSpec) { s.Files[0].Path = "/etc/a b" },
		"remove root":      func(s *DebianSpec) { s.Remove = []string{"/"} },
		"remove glob":      func(s *DebianSpec) { s.Remove = []string{"/usr/share/*"} },
		"env without =":    func(s *DebianSpec) { s.Env = []string{"HOME"} },
		"env with a space": func(s *DebianSpec) { s.Env = []string{"A=b c"} },
		"no command":       func(s *DebianSpec) { s.Cmd = nil },
		"binary path":      func(s *DebianSpec) { s.Binaries = []Binary{{Package: "p", Name: "../x"}} },
		"binary twice":     func(s *DebianSpec) { s.Binaries = []Binary{{Package: "p", Name: "x"}, {Package: "q", Name: "x"}} },
		"binary glob":      func(s *DebianSpec) { s.Binaries = []Binary{{Package: "p", Name: "x*"}} },
		"prune root":       func(s *DebianSpec) { s.Prune = []Prune{{Dir: "/", Keep: []string{"a"}}} },
		"volume root":      func(s *DebianSpec) { s.Volumes = []string{"/"} },
		"relative volume":  func(s *DebianSpec) { s.Volumes = []string{"data"} },
		"prune nothing":    func(s *DebianSpec) { s.Prune[0].Keep = nil },
		"keep a pattern":   func(s *DebianSpec) { s.Prune[0].Keep = []string{"a*"} },
		"prepare nothing":  func(s *DebianSpec) { s.Prepare = []Command{{User: "x"}} },
		"prepare as -u":    func(s *DebianSpec) { s.Prepare = []Command{{User: "-u", Args: []string{"true"}}} },
		"prepare with env": func(s *DebianSpec) { s.Prepare = []Command{{Env: []string{"=x"}, Args: []string{"true"}}} },
	} {
		s := RabbitMQ(Debian{})
		change(&s)
		if err := s.check(); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	s := DebianSpec{
		Name:     "x",
		Debian:   Debian{Mirror: "http://archive.example/debian", SecurityMirror: "http://archive.example/security"},
		Packages: []string{"rabbitmq-server", "procps"},
		Files:    []RootFile{{Path: "/etc/a/one.conf"}, {Path: "/etc/a/two.conf"}},
		Binaries: []Binary{{Package: module + "/cmd/mesh-delay", Name: "mesh-delay"}},
		Prepare: []Command{
			{User: "postgres", Env: []string{"PGDATA=/d"}, Args: []string{"/bin/sh", "/e.sh", "--template"}},
			{Env: []string{"PATH=/bin"}, Args: []string{"touch", "/it's"}},
		},
		Remove: []string{"/usr/share/doc", "/var/lib/it's"},
		Cmd:    []string{"/bin/true"},
	}
	got := mmdebstrapArgs(s, "/tmp/d", "/cache/x", "/tmp/d/rootfs.tar")
	want := []string{
		"--variant=essential",
		"--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
		"--dpkgopt=force-unsafe-io",
		"--include=rabbitmq-server,procps",
		"--skip=download/empty",
		"--skip=essential/unlink",
		`--setup-hook=mkdir -p "$1"/var/cache/apt/archives`,
		"--setup-hook=sync-in /cache/x /var/cache/apt/archives",
		`--customize-hook=find '/cache/x' -maxdepth 1 -type f -name '*.deb' -delete`,
		"--customize-hook=sync-out /var/cache/apt/archives /cache/x",
		`--customize-hook=mkdir -p "$1"'/etc/a'`,
		`--customize-hook=mkdir -p "$1"'/usr/local/bin'`,
		"--customize-hook=upload /tmp/d/file0 /etc/a/one.conf",
		`--customize-hook=chmod 0644 "$1"'/etc/a/one.conf'`,
		"--customize-hook=upload /tmp/d/file1 /etc/a/two.conf",
		`--customize-hook=chmod 0644 "$1"'/etc/a/two.conf'`,
		"--customize-hook=upload /tmp/d/bin0 /usr/local/bin/mesh-delay",
		`--customize-hook=chmod 0755 "$1"'/usr/local/bin/mesh-delay'`,
		`--customize-hook=chroot "$1" runuser -u 'postgres' -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin 'PGDATA=/d' '/bin/sh' '/e.sh' '--template'`,
		`--customize-hook=chroot "$1" env -i 'PATH=/bin' 'touch' '/it'"'"'s'`,
		`--customize-hook=rm -rf "$1"'/usr/share/doc' "$1"'/var/lib/it'"'"'s'`,
		"bookworm", "/tmp/d/rootfs.tar",
		"deb http://archive.example/debian bookworm main",
		"deb http://archive.example/debian bookworm-updates main",
		"deb http://archive.example/security bookworm-security main",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("expected\n%s\ngot\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	if got := mmdebstrapArgs(s, "/tmp/d", "", "/t.tar"); slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, "archives") }) {
		t.Fatalf("expected no cache hooks without a cache, got %q", got)
	}
}

func TestDebianChanges(t *testing.T) {
	got, err := RabbitMQ(Debian{}).changes(map[string]string{LabelInputs: "abc", LabelImage: "mesh-rabbitmq"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV HOME=/var/lib/rabbitmq",
		"ENV RABBITMQ_NODENAME=rabbit@localhost",
		"ENV LANG=C.UTF-8",
		"USER rabbitmq",
		"EXPOSE 5672/tcp",
		`CMD ["/usr/lib/rabbitmq/bin/rabbitmq-server"]`,
		`LABEL mesh.image="mesh-rabbitmq"`,
		`LABEL mesh.inputs="abc"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("expected\n%s\ngot\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	pg, err := Postgres(Debian{}).changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pg, "VOLUME /var/lib/postgresql") {
		t.Fatalf("expected mesh-postgres's data on a volume, got\n%s", strings.Join(pg, "\n"))
	}
}

func TestReadImportStream(t *testing.T) {
	id, err := readImportStream(strings.NewReader(`{"status":"sha256:abc"}` + "\r\n"))
	if err != nil || id != "sha256:abc" {
		t.Fatalf("expected sha256:abc, got %q, %v", id, err)
	}
	_, err = readImportStream(strings.NewReader(`{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`))
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("expected the engine's error, got %v", err)
	}
}

func TestMmdebstrapLog(t *testing.T) {
	var out bytes.Buffer
	l := &mmdebstrapLog{out: &out}
	for _, chunk := range []string{"I: downloading", " packages with apt...\nGet:1 x\n", "I: using /tmp/x as tempdir\nE: boom"} {
		if _, err := l.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := out.String(); got != "  I: downloading packages with apt...\n" {
		t.Fatalf("expected only the phase line forwarded, got %q", got)
	}
	if tail := l.Tail(); !strings.HasSuffix(tail, "tempdir\nE: boom") {
		t.Fatalf("expected the tail to end with the unfinished error line, got %q", tail)
	}
	out.Reset()
	named := &mmdebstrapLog{out: &out, name: "mesh-rabbitmq"}
	if _, err := named.Write([]byte("I: extracting archives...\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "  mesh-rabbitmq: I: extracting archives...\n" {
		t.Fatalf("expected the phase line under the image's name, got %q", got)
	}
}

// TestEnsureDebianBuildsOnceAndRebuildsOnChange builds a test-named image
// of Debian's essential packages alone (the smallest mmdebstrap build):
// the first EnsureDebian builds it with the file, the binary and the
// settings of the spec, the second keeps the very same image, and a
// changed file builds a new one and removes the old.
func TestEnsureDebianBuildsOnceAndRebuildsOnChange(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	spec := DebianSpec{
		Name:     "mesh-debian-test-" + hex.EncodeToString(suffix),
		Debian:   DebianFromEnv(os.Getenv),
		Files:    []RootFile{{Path: "/etc/mesh/test.conf", Body: "one\n"}},
		Binaries: []Binary{{Package: module + "/cmd/mesh-delay", Name: "mesh-delay"}},
		Remove:   []string{"/usr/share/doc"},
		Env:      []string{"MESH_TEST=1"},
		User:     "nobody",
		Cmd:      []string{"/bin/cat", "/etc/mesh/test.conf"},
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	b := &Builder{Root: root, Out: &out}
	defer b.Close()
	ref := b.Ref(Spec{Name: spec.Name})
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		if dir := b.debianCache(spec.Name); dir != "" {
			_ = os.RemoveAll(dir)
		}
		_ = os.Remove(filepath.Join(os.TempDir(), "mesh-image-"+sanitize(ref)+".lock"))
		t.Logf("builder output:\n%s", out.String())
	})

	start := time.Now()
	if _, err = b.EnsureDebian(ctx, spec); err != nil {
		if errors.Is(err, ErrInfrastructure) && strings.Contains(err.Error(), "find mmdebstrap") {
			t.Fatalf("%v\n(install it: apt-get install -y mmdebstrap)", err)
		}
		t.Fatalf("first ensure: %v", err)
	}
	t.Logf("essential-only image built in %s", time.Since(start).Round(time.Second))
	first, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	binaries, err := b.digest(ctx, root, Spec{Name: spec.Name, Binaries: spec.Binaries})
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := debianDigest(spec, runtime.GOARCH, binaries)
	if c := first.Config; c == nil || c.Labels[LabelInputs] != wantDigest || c.Labels[LabelImage] != spec.Name {
		t.Fatalf("expected labels %s=%s and %s=%s, got %v", LabelInputs, wantDigest, LabelImage, spec.Name, first.Config)
	}
	if c := first.Config; c.User != "nobody" || !slices.Contains(c.Env, "MESH_TEST=1") || !slices.Equal(c.Cmd, spec.Cmd) {
		t.Fatalf("expected user, environment and command of the spec, got user %q env %q cmd %q", c.User, c.Env, c.Cmd)
	}
	if got := readImageFile(t, cli, ref, "/etc/mesh/test.conf"); got.body != "one\n" || got.mode != 0o644 || got.uid != 0 {
		t.Fatalf("expected /etc/mesh/test.conf root-owned 0644 with \"one\\n\", got %+v", got)
	}
	if got := readImageFile(t, cli, ref, "/usr/local/bin/mesh-delay"); !strings.HasPrefix(got.body, "\x7fELF") || got.mode != 0o755 || got.uid != 0 {
		t.Fatalf("expected /usr/local/bin/mesh-delay a root-owned 0755 executable, got mode %o uid %d, %d bytes", got.mode, got.uid, len(got.body))
	}
	if got := readImageFile(t, cli, ref, "/usr/share/doc"); got.found {
		t.Fatalf("expected /usr/share/doc removed, it is there")
	}

	out.Reset()
	if _, err := b.EnsureDebian(ctx, spec); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	if second, _ := cli.ImageInspect(ctx, ref); second.ID != first.ID || second.Created != first.Created {
		t.Fatalf("expected the second ensure to keep image %s, got %s", first.ID, second.ID)
	}
	if !strings.Contains(out.String(), "up to date") {
		t.Fatalf("expected the second ensure to say the image is up to date, said %q", out.String())
	}

	spec.Files[0].Body = "two\n"
	if _, err := b.EnsureDebian(ctx, spec); err != nil {
		t.Fatalf("ensure after a change: %v", err)
	}
	third, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if third.ID == first.ID {
		t.Fatalf("expected a new image after the file changed, still %s", first.ID)
	}
	if got := readImageFile(t, cli, ref, "/etc/mesh/test.conf"); got.body != "two\n" {
		t.Fatalf("expected the changed file in the new image, got %q", got.body)
	}
	if _, err := cli.ImageInspect(ctx, first.ID); !cerrdefs.IsNotFound(err) {
		t.Fatalf("expected the replaced image %s to be removed, inspect says %v", first.ID, err)
	}
}

type imageFile struct {
	found bool
	body  string
	mode  int64
	uid   int
}

// readImageFile reads path from a created, never started, container of
// ref.
func readImageFile(t *testing.T, cli interface {
	ContainerCreate(context.Context, client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	CopyFromContainer(context.Context, string, client.CopyFromContainerOptions) (client.CopyFromContainerResult, error)
	ContainerRemove(context.Context, string, client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
}, ref, path string) imageFile {
	t.Helper()
	ctx := t.Context()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Image: ref})
	if err != nil {
		t.Fatalf("create container of %s: %v", ref, err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	res, err := cli.CopyFromContainer(ctx, c.ID, client.CopyFromContainerOptions{SourcePath: path})
	if cerrdefs.IsNotFound(err) {
		return imageFile{}
	}
	if err != nil {
		t.Fatalf("copy %s from %s: %v", path, ref, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatalf("read %s from %s: %v", path, ref, err)
	}
	body, err := io.ReadAll(tr)
	if err != nil {
		t.Fatalf("read %s from %s: %v", path, ref, err)
	}
	return imageFile{found: true, body: string(body), mode: hdr.Mode & 0o7777, uid: hdr.Uid}
}

// TestPruneHook runs the hook as mmdebstrap would (sh -c HOOK sh ROOT) on
// a tree shaped like RabbitMQ's plugins: it keeps what Keep names, with or
// without a version, removes the rest, and fails where the directory or a
// kept entry is missing.
func TestPruneHook(t *testing.T) {
	p := Prune{Dir: "/usr/lib/x/server-*/plugins", Keep: []string{"rabbit", "ra", "getopt"}}
	run := func(root string) (string, error) {
		out, err := exec.Command("sh", "-c", pruneHook(p), "sh", root).CombinedOutput()
		return string(out), err
	}
	root := t.TempDir()
	plugins := filepath.Join(root, "usr/lib/x/server-3.10.8/plugins")
	for _, e := range []string{"rabbit-3.10.8/ebin", "rabbit_common-3.10.8/ebin", "ra-2.2.0/ebin", "rabbitmq_mqtt-3.10.8/ebin", "getopt/ebin", "README"} {
		if strings.Contains(e, "/") {
			if err := os.MkdirAll(filepath.Join(plugins, e), 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(filepath.Join(plugins, e), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(root); err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(plugins)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"getopt", "ra-2.2.0", "rabbit-3.10.8"}; !slices.Equal(left, want) {
		t.Errorf("expected %q left, got %q", want, left)
	}

	if err := os.RemoveAll(filepath.Join(plugins, "ra-2.2.0")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(root); err == nil || !strings.Contains(out, "no ra in") {
		t.Errorf("expected a missing kept entry to fail the hook naming it, got %v: %s", err, out)
	}
	if out, err := run(t.TempDir()); err == nil || !strings.Contains(out, "no directory /usr/lib/x/server-*/plugins") {
		t.Errorf("expected a missing directory to fail the hook naming it, got %v: %s", err, out)
	}
}
