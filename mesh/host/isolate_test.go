package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/wire"
)

// pry is a module's program that looks for what is not its own: the
// host's state, the sealing key, a sibling's credential and home, the
// host's process; it writes what it managed into its home.
const pry = `
[ "$MESH_MODULE" = sensor ] && other=logger || other=sensor
{
echo "id $(id -u) $(id -g) $(id -G)"
echo "pwd $(pwd)"
echo "env $(env | sort | tr '\n' ' ')"
cat "$MESH_CREDENTIAL" >/dev/null 2>&1 && echo "own credential"
for f in STATE/credential.json STATE/sealing-key.json STATE/applied.json STATE/identities.json STATE/modules/$other/credential.json STATE/modules/$other/config.json; do
  cat "$f" >/dev/null 2>&1 && echo "read $f"
done
ls STATE >/dev/null 2>&1 && echo "listed the state"
ls STATE/modules >/dev/null 2>&1 && echo "listed the modules"
ls STATE/modules/$other >/dev/null 2>&1 && echo "entered $other's directory"
ls STATE/modules/$other/home >/dev/null 2>&1 && echo "entered $other's home"
echo x 2>/dev/null > "$MESH_CREDENTIAL" && echo "wrote its credential"
echo x 2>/dev/null > STATE/planted && echo "wrote into the state"
echo x 2>/dev/null > STATE/modules/$MESH_MODULE/planted && echo "wrote into its directory"
kill -0 HOSTPID 2>/dev/null && echo "signalled the host"
cat /proc/HOSTPID/environ >/dev/null 2>&1 && echo "read the host's environment"
echo tried
} >> seen 2>&1
exec sleep 600`

// TestEachModuleRunsAsAnIdentityOfItsOwn: a module's process runs as a
// user and group of its own (no supplementary group), the same across
// restarts of the host, in its own home, with an environment made for it;
// it reads its own credential and nothing of the host's or a sibling's,
// and writes nowhere but its home.
func TestEachModuleRunsAsAnIdentityOfItsOwn(t *testing.T) {
	t.Setenv("MESH_HOST_SECRET", "the host's environment")
	s, dir := newSupervisor(t)
	prog := strings.NewReplacer("STATE", s.state.Dir, "HOSTPID", strconv.Itoa(os.Getpid())).Replace(pry)
	script(t, dir, DefaultProgram, prog)
	if err := s.state.PutCredential(wire.Credential{URL: "tls://host.node-a:secret@nats:4222"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.state.SealingKey(); err != nil {
		t.Fatal(err)
	}
	mods := []string{"sensor", "logger"}
	d := wire.Declaration{Node: "node-a", Revision: 1, Modules: mods, Config: map[string]json.RawMessage{"logger": json.RawMessage(`{"secret":1}`)}}
	for _, mod := range mods {
		id, err := s.identity(mod)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.state.keepForModule(mod, credentialName, []byte(`{"url":"tls://mod.node-a.`+mod+`:pw@nats:4222"}`), id); err != nil {
			t.Fatal(err)
		}
	}
	seen := func(mod string) string {
		b, _ := os.ReadFile(filepath.Join(s.state.ModuleHome(mod), "seen"))
		return string(b)
	}
	tried := func(n int) {
		t.Helper()
		waitFor(t, 10*time.Second, "both modules tried", func() bool {
			return strings.Count(seen("sensor"), "tried") == n && strings.Count(seen("logger"), "tried") == n
		})
	}
	if err := s.set(d); err != nil {
		t.Fatal(err)
	}
	tried(1)
	s.stopAll()

	ids := map[string]string{}
	for _, mod := range mods {
		got := seen(mod)
		idLine := strings.SplitN(got, "\n", 2)[0]
		var uid, gid, groups int
		if _, err := fmt.Sscanf(idLine, "id %d %d %d", &uid, &gid, &groups); err != nil || uid != gid || groups != gid || uid < 61000 || uid > 61009 {
			t.Errorf("%s runs as %q: want a uid of the span 61000-61009, its group the same and no other", mod, idLine)
		}
		if strings.Count(idLine, " ") != 3 {
			t.Errorf("%s has supplementary groups: %q", mod, idLine)
		}
		ids[mod] = idLine
		if want := "pwd " + s.state.ModuleHome(mod) + "\n"; !strings.Contains(got, want) {
			t.Errorf("%s's working directory: want %q in %q", mod, want, got)
		}
		for _, want := range []string{"HOME=" + s.state.ModuleHome(mod), "MESH_CREDENTIAL=" + s.state.ModuleCredential(mod), "MESH_MODULE=" + mod, "MESH_NODE=node-a", "own credential", "tried"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: expected %q in what it saw:\n%s", mod, want, got)
			}
		}
		for _, leak := range []string{"MESH_HOST_SECRET", "read ", "listed", "entered", "wrote", "signalled"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s managed what it must not (%q):\n%s", mod, leak, got)
			}
		}
		if (mod == "logger") != strings.Contains(got, "MESH_CONFIG=") {
			t.Errorf("%s: MESH_CONFIG given to the module declared a configuration alone:\n%s", mod, got)
		}
	}
	if ids["sensor"] == ids["logger"] {
		t.Fatalf("both modules run as %q", ids["sensor"])
	}

	// The host started again: the same identities.
	again := &supervisor{programs: dir, state: s.state, ids: &identities{state: s.state, span: s.ids.span}, node: "node-a", log: s.log}
	defer again.stopAll()
	if err := again.set(d); err != nil {
		t.Fatal(err)
	}
	tried(2)
	for _, mod := range mods {
		if lines := strings.Split(seen(mod), "\n"); !slices.Contains(lines[1:], ids[mod]) {
			t.Errorf("%s ran as %q, then not so after a restart:\n%s", mod, ids[mod], seen(mod))
		}
	}
}

// nonRootEnv marks the test binary run again as another user by
// TestAHostThatCannotChangeIdentityRunsNoModule.
const nonRootEnv = "MESH_HOST_TEST_NOT_ROOT"

// TestAHostThatCannotChangeIdentityRunsNoModule: a host given programs
// to run, without the capabilities to run them as their own identities,
// refuses to start and says why, rather than run them as itself. As root,
// the test runs itself again as nobody (uid 65534).
func TestAHostThatCannotChangeIdentityRunsNoModule(t *testing.T) {
	if os.Geteuid() != 0 || os.Getenv(nonRootEnv) != "" {
		root := os.Getenv(nonRootEnv)
		if root == "" {
			root = t.TempDir()
		}
		programs := filepath.Join(root, "programs")
		err := Run(t.Context(), Options{State: State{Dir: filepath.Join(root, "state")}, TokenFile: filepath.Join(root, "absent-token"), Programs: programs})
		if !errors.Is(err, ErrIsolation) || !strings.Contains(err.Error(), "uid "+strconv.Itoa(os.Geteuid())) || !strings.Contains(err.Error(), "CAP_SETUID") {
			t.Fatalf("expected the host to refuse, naming its uid and the capabilities it lacks; got %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	root := testutil.OpenTempDir(t)
	for _, d := range []string{"programs", "state"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary is in go's own work directory, closed to others.
	self := filepath.Join(root, "host.test")
	copyFile(t, os.Args[0], self)
	cmd := exec.Command(self, "-test.run=^TestAHostThatCannotChangeIdentityRunsNoModule$", "-test.v")
	cmd.Env = append(os.Environ(), nonRootEnv+"="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("refused: ")) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "state", "modules")); err == nil {
		t.Error("the refusing host made its modules' directory")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
