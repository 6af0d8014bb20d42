package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/statedir"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

const good = `
name: m
bus: {names: [localhost, 127.0.0.1], port: PORT, monitor: 127.0.0.1}
nodes:
  - {name: a, modules: [em, co]}
modules:
  - {name: em, emits: [x.y], tools: [t]}
  - {name: co, consumes: [em.x.*]}
`

func cli(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGenesisRefusesBadDescriptionsWritingNothing(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown module", strings.Replace(good, "[em, co]", "[em, co, ghost]", 1), `nodes[0] "a".modules[2] "ghost": unknown module`},
		{"duplicated name", good + "  - {name: em}\n", `modules[2] "em": duplicated name`},
		{"consumed pattern nobody emits", strings.Replace(good, "em.x.*", "em.z", 1), `modules[1] "co".consumes[0] "em.z": no manifest emits it`},
		{"bad name", strings.Replace(good, "{name: a,", "{name: a.b,", 1), `nodes[0] "a.b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(c.yaml, "PORT", "4222", 1))
			for _, state := range []string{filepath.Join(root, "absent"), root + "/empty"} {
				if strings.HasSuffix(state, "empty") {
					if err := os.Mkdir(state, 0o700); err != nil {
						t.Fatal(err)
					}
				}
				code, stdout, stderr := cli(t, context.Background(), "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4")
				if code != exitFailed {
					t.Fatalf("expected exit %d, got %d\n%s", exitFailed, code, stderr)
				}
				if !strings.Contains(stderr, c.want) {
					t.Fatalf("expected stderr to name %q, got:\n%s", c.want, stderr)
				}
				if stdout != "" {
					t.Errorf("expected nothing on stdout, got %q", stdout)
				}
				entries, err := os.ReadDir(state)
				if strings.HasSuffix(state, "absent") && !os.IsNotExist(err) {
					t.Errorf("a refused genesis created %s", state)
				}
				if len(entries) > 0 {
					t.Errorf("a refused genesis wrote into %s: %v", state, entries)
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"bogus"}, {"genesis", "--mesh", "x"}, {"run", "--mesh", "x", "--state", "y", "extra"}, {"apply", "--nope"}, {"status"}, {"status", "--state", "x", "extra"}, {"status", "--mesh", "x"}, {"amqp", "--mesh", "x", "--state", "y"}, {"amqp", "--mesh", "x", "--state", "y", "--addr", "rabbitmq"}, {"amqp", "--mesh", "x", "--state", "y", "--addr", "r:1", "--name", ""}} {
		if code, _, stderr := cli(t, context.Background(), args...); code != exitUsage || !strings.Contains(stderr, "usage") && !strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%v: expected exit %d with usage, got %d:\n%s", args, exitUsage, code, stderr)
		}
	}
}

// TestStatus prints what the running controller keeps: a line per failing
// provision for a person, the whole status as JSON for a program, and a
// refusal, not an empty status, for a directory without a genesis.
func TestStatus(t *testing.T) {
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()
	if code, _, stderr := cli(t, ctx, "status", "--state", state); code != exitFailed || !strings.Contains(stderr, "no genesis") {
		t.Fatalf("status before genesis: expected exit 1 saying there is no genesis, got %d:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	if code, stdout, _ := cli(t, ctx, "status", "--state", state); code != exitOK || stdout != "no provision is failing\n" {
		t.Fatalf("status of a new mesh: got %d %q", code, stdout)
	}
	since := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	st := store.Status{Through: 7, Failing: []store.FailingProvision{{
		Provider: "pg", Consumer: "co", Node: "a", Class: wire.ClassUnreachable, Since: since,
		Said: since.Add(5 * time.Minute), ReportedBy: "a", EventID: "evt-1",
	}}}
	if err := store.FileStore(state).Update(ctx, func(tx store.Tx) error { return tx.PutStatus(ctx, st) }); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := cli(t, ctx, "status", "--state", state)
	want := "1 provision(s) failing:\n  pg fails co on a: unreachable since 2026-11-01T10:00:00Z (said 2026-11-01T10:05:00Z by a, event evt-1)\n"
	if code != exitOK || stdout != want {
		t.Fatalf("status:\n got %d %q\nwant 0 %q", code, stdout, want)
	}
	code, stdout, _ = cli(t, ctx, "status", "--state", state, "--json")
	var got store.Status
	if code != exitOK || json.Unmarshal([]byte(stdout), &got) != nil || got.Through != 7 || len(got.Failing) != 1 || got.Failing[0] != st.Failing[0] {
		t.Fatalf("status --json: got %d %q", code, stdout)
	}

	// Refusals: counted by kind, the newest five listed with their reasons.
	var refused store.Refusals
	refused.Counts = map[string]int{store.RefusedEnrolment: 6, store.RefusedPush: 1}
	for i := range 7 {
		refused.Last = append(refused.Last, store.Refusal{Kind: store.RefusedEnrolment, Key: fmt.Sprintf("seq:%d", i+1), At: since, Reason: fmt.Sprintf("reason %d", i+1)})
	}
	if err := store.FileStore(state).Update(ctx, func(tx store.Tx) error { return tx.PutRefusals(ctx, refused) }); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = cli(t, ctx, "status", "--state", state)
	want += "7 CONTROL message(s) refused (enrolment 6, push 1); the newest:\n" +
		"  2026-11-01T10:00:00Z enrolment seq:3: reason 3\n  2026-11-01T10:00:00Z enrolment seq:4: reason 4\n  2026-11-01T10:00:00Z enrolment seq:5: reason 5\n" +
		"  2026-11-01T10:00:00Z enrolment seq:6: reason 6\n  2026-11-01T10:00:00Z enrolment seq:7: reason 7\n"
	if code != exitOK || stdout != want {
		t.Fatalf("status with refusals:\n got %d %q\nwant 0 %q", code, stdout, want)
	}
	code, stdout, _ = cli(t, ctx, "status", "--state", state, "--json")
	var withRefusals struct {
		Refusals store.Refusals `json:"refusals"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &withRefusals) != nil || withRefusals.Refusals.Total() != 7 || len(withRefusals.Refusals.Last) != 7 {
		t.Fatalf("status --json with refusals: got %d %q", code, stdout)
	}
}

// TestAMQP mints the AMQP bus into the state after a genesis: a
// credential per principal for the address given, refused before one.
func TestAMQP(t *testing.T) {
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()
	args := []string{"amqp", "--mesh", meshFile, "--state", state, "--addr", "rabbitmq:5671"}
	if code, _, stderr := cli(t, ctx, args...); code != exitFailed || !strings.Contains(stderr, "no genesis") {
		t.Fatalf("amqp before genesis: expected exit 1 saying there is no genesis, got %d:\n%s", code, stderr)
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := cli(t, ctx, args...)
	if code != exitOK {
		t.Fatalf("amqp: exit %d\n%s", code, stderr)
	}
	var got struct{ Users []string }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Users) != 3 {
		t.Fatalf("amqp printed %q, want the three principals: the controller, em and co", stdout)
	}
	for _, u := range got.Users {
		data, err := os.ReadFile(statedir.Layout{Dir: state}.AMQPCredential(u))
		if err != nil {
			t.Fatal(err)
		}
		c, err := wire.ParseCredential(data)
		if err != nil || c.User() != u || c.Host() != "rabbitmq" {
			t.Errorf("%s: credential %+v, %v", u, c, err)
		}
	}
}

// genesisIn runs genesis of the good description in a directory of the
// test's, and returns the description's file and the state directory.
func genesisIn(t *testing.T) (meshFile, state string) {
	t.Helper()
	root := t.TempDir()
	meshFile = writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state = filepath.Join(root, "state")
	if code, _, stderr := cli(t, context.Background(), "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	return meshFile, state
}

// TestTokenIssue prints an enrolment credential for a node of the
// description, composes its user into nats.conf, and refuses a node the
// description lacks.
func TestTokenIssue(t *testing.T) {
	meshFile, state := genesisIn(t)
	ctx := context.Background()
	code, stdout, stderr := cli(t, ctx, "token", "issue", "--mesh", meshFile, "--state", state, "--ttl", "10m", "a")
	if code != exitOK {
		t.Fatalf("token issue: exit %d\n%s", code, stderr)
	}
	c, err := wire.ParseCredential([]byte(stdout))
	if err != nil || c.Principal != wire.PrincipalEnrol {
		t.Fatalf("token issue printed %q (%v), want an enrolment credential", stdout, err)
	}
	if code, doc, stderr := cli(t, ctx, "credential", "--state", state, wire.EnrolUser(c.Name)); code != exitOK || doc != stdout {
		t.Errorf("credential of the token's user: exit %d, %q (want what token issue printed)\n%s", code, doc, stderr)
	}
	if code, _, stderr := cli(t, ctx, "credential", "--state", state, "nobody"); code != exitFailed || !strings.Contains(stderr, "no credential of nobody") {
		t.Errorf("credential of nobody: expected exit 1 saying so, got %d:\n%s", code, stderr)
	}
	conf, err := os.ReadFile(statedir.Layout{Dir: state}.NATSConfig())
	if err != nil || !strings.Contains(string(conf), wire.EnrolUser(c.Name)) {
		t.Fatalf("the token's user is not in nats.conf (%v)", err)
	}
	if code, _, stderr := cli(t, ctx, "token", "issue", "--mesh", meshFile, "--state", state, "nowhere"); code != exitFailed || !strings.Contains(stderr, `no node "nowhere"`) {
		t.Errorf("a node not in the description: expected exit 1 naming it, got %d:\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"token"}, {"token", "revoke"}, {"token", "issue", "--mesh", meshFile, "--state", state},
		{"token", "issue", "--mesh", meshFile, "--state", state, "--ttl", "0s", "a"},
		{"token", "issue", "--mesh", meshFile, "--state", state, "--ttl", "9999h", "a"},
		{"token", "issue", "--mesh", meshFile, "--state", state, "--grace", "0s", "a"},
		{"token", "issue", "--mesh", meshFile, "--state", state, "--grace", "9999h", "a"},
	} {
		if code, _, _ := cli(t, ctx, args...); code != exitUsage {
			t.Errorf("%q: expected exit %d, got %d", args, exitUsage, code)
		}
	}
}

// TestApplyAfterAPushIsRefused: once a description was pushed the mesh
// runs it, and apply of a file would undo the push's users.
func TestApplyAfterAPushIsRefused(t *testing.T) {
	meshFile, state := genesisIn(t)
	ctx := context.Background()
	st := store.FileStore(state)
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutDescription(ctx, []byte(good)) }); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, ctx, "apply", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitFailed || !strings.Contains(stderr, "mesh-controller push instead") {
		t.Fatalf("apply after a push: expected exit 1 pointing to push, got %d:\n%s", code, stderr)
	}
}

func TestGenesisApplyAndRun(t *testing.T) {
	root := t.TempDir()
	port := testutil.FreePort(t)
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", strconv.Itoa(port), 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()

	code, stdout, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4")
	if code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	var g rollout.GenesisResult
	if err := json.Unmarshal([]byte(stdout), &g); err != nil || len(g.Users) == 0 {
		t.Fatalf("genesis: expected a JSON summary on stdout, got %q (%v)", stdout, err)
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state); code != exitFailed || !strings.Contains(stderr, "already holds a genesis") {
		t.Fatalf("second genesis: expected exit 1 saying so, got %d:\n%s", code, stderr)
	}

	writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", strconv.Itoa(port), 1)+"persons:\n  - {name: carol, tools: [em.t]}\n")
	code, stdout, stderr = cli(t, ctx, "apply", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4")
	var a rollout.ApplyResult
	if code != exitOK || json.Unmarshal([]byte(stdout), &a) != nil || len(a.Added) != 1 || a.Added[0] != wire.PersonUser("carol") || !a.ConfigChanged {
		t.Fatalf("apply: expected exit 0 and carol added, got %d %q\n%s", code, stdout, stderr)
	}

	startServer(t, meshFile, state, port)
	var logs testutil.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"run", "--mesh", meshFile, "--state", state}, &bytes.Buffer{}, &logs)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"ready"`) {
		if time.Now().After(deadline) {
			t.Fatalf(`no "msg":"ready" within 20s:\n%s`, logs.String())
		}
		select {
		case code := <-done:
			t.Fatalf("run exited %d before ready:\n%s", code, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel() // what SIGTERM does through signal.NotifyContext
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("run: expected exit 0 after the signal, got %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not exit within 10s of the signal")
	}
}

// startServer runs nats-server in-process with the state's users, composed
// for loopback and temporary directories instead of the container's paths.
func startServer(t *testing.T, meshFile, state string, port int) {
	t.Helper()
	m, err := meshdesc.Load(meshFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := store.FileStore(state).Secrets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[string]string{}
	for u, s := range secrets {
		hashes[u] = s.Hash
	}
	conf, err := compose.Config(m, compose.Inputs{
		Hashes:    hashes,
		ConfigDir: filepath.Join(state, statedir.NATSDir),
		StoreDir:  t.TempDir(),
		Listen:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Monitor:   "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(writeFile(t, t.TempDir(), "test.conf", string(conf)))
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready within 10s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
}

// TestHelp: asking for help is not bad usage; the usage goes to stdout.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"},
		{"genesis", "--help"}, {"apply", "-h"}, {"run", "--help"}, {"status", "-h"}, {"status", "--help"},
	} {
		code, stdout, stderr := cli(t, context.Background(), args...)
		if code != exitOK || !strings.Contains(stdout, "usage: mesh-controller") {
			t.Errorf("%q: expected exit 0 with the usage on stdout, got %d:\n%s%s", args, code, stdout, stderr)
		}
	}
	code, stdout, _ := cli(t, context.Background(), "genesis", "--help")
	if code != exitOK || !strings.Contains(stdout, "-bcrypt-cost int") {
		t.Errorf("genesis --help: expected its flags, got:\n%s", stdout)
	}
	for _, args := range [][]string{{"genesis", "--bogus"}, {"status", "--bogus"}, {"frobnicate"}} {
		code, stdout, stderr := cli(t, context.Background(), args...)
		if code != exitUsage || stdout != "" || stderr == "" {
			t.Errorf("%q: expected exit 2 saying why on stderr, got %d: stdout %q stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestPersonIssueRevokeAndList: the person's credential comes out sealed
// to the key given, the flags may follow the name, and each bad call says
// what was wrong.
func TestPersonIssueRevokeAndList(t *testing.T) {
	meshFile, state := genesisIn(t)
	ctx := context.Background()
	key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := seal.EncodePublic(key.Public)
	code, stdout, stderr := cli(t, ctx, "person", "issue", "carol", "--mesh", meshFile, "--state", state, "--tools", "em.t", "--key", pub)
	if code != exitOK {
		t.Fatalf("person issue: exit %d\n%s", code, stderr)
	}
	sealed, err := wire.ParseSealedCredential([]byte(stdout))
	if err != nil || sealed.Person != "carol" {
		t.Fatalf("person issue printed %q (%v), want carol's sealed credential", stdout, err)
	}
	if strings.Contains(stdout, "person.carol") {
		t.Error("the sealed credential shows the user in the clear")
	}
	plain, err := key.Open(sealed.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := wire.ParseCredential(plain); err != nil || c.Name != "carol" || strings.Join(c.Tools, ",") != "em.t" {
		t.Fatalf("the credential sealed: %+v, %v", c, err)
	}
	if code, _, stderr := cli(t, ctx, "person", "issue", "--mesh", meshFile, "--state", state, "--admin", "--key", pub, "dave"); code != exitOK {
		t.Fatalf("person issue --admin: exit %d\n%s", code, stderr)
	}
	if code, out, _ := cli(t, ctx, "person", "list", "--state", state); code != exitOK || !strings.Contains(out, "carol: em.t") || !strings.Contains(out, "dave: *") {
		t.Errorf("person list: exit %d\n%s", code, out)
	}
	if code, out, stderr := cli(t, ctx, "person", "revoke", "carol", "--mesh", meshFile, "--state", state); code != exitOK || !strings.Contains(out, "carol revoked") {
		t.Fatalf("person revoke: exit %d\n%s%s", code, out, stderr)
	}
	conf, err := os.ReadFile(statedir.Layout{Dir: state}.NATSConfig())
	if err != nil || strings.Contains(string(conf), "person.carol") || !strings.Contains(string(conf), "person.dave") {
		t.Fatalf("after revoking carol, nats.conf still holds her or lost dave (%v)", err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"person", "issue", "erin", "--mesh", meshFile, "--state", state, "--tools", "em.nope", "--key", pub}, exitFailed, `does not serve tool "nope"`},
		{[]string{"person", "issue", "erin", "--mesh", meshFile, "--state", state, "--tools", "em.t", "--key", "short"}, exitFailed, "sealing key"},
		{[]string{"person", "revoke", "carol", "--mesh", meshFile, "--state", state}, exitFailed, `no person "carol"`},
		{[]string{"person", "issue", "erin", "--mesh", meshFile, "--state", state, "--key", pub}, exitUsage, "--tools LIST or --admin"},
		{[]string{"person", "issue", "erin", "--mesh", meshFile, "--state", state, "--tools", "em.t", "--admin", "--key", pub}, exitUsage, "--tools LIST or --admin"},
		{[]string{"person", "issue", "erin", "--mesh", meshFile, "--state", state, "--tools", "em.t"}, exitUsage, "--key is required"},
		{[]string{"person", "issue", "--mesh", meshFile, "--state", state, "--admin", "--key", pub}, exitUsage, "expected NAME"},
		{[]string{"person", "fire", "carol"}, exitUsage, "the verb is one of issue, revoke, list"},
		{[]string{"person"}, exitUsage, "the verb is one of"},
	} {
		code, _, stderr := cli(t, ctx, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: expected exit %d saying %q, got %d:\n%s", c.args, c.code, c.want, code, stderr)
		}
	}
	if code, out, _ := cli(t, ctx, "person", "--help"); code != exitOK || !strings.Contains(out, "person issue") {
		t.Errorf("person --help: exit %d\n%s", code, out)
	}
}

// TestRunRefusesWaitsUnderASecond: each of run's waits is refused below a
// second as a usage error naming the flag, before anything is dialled.
func TestRunRefusesWaitsUnderASecond(t *testing.T) {
	meshFile, state := genesisIn(t)
	ctx := context.Background()
	for _, flag := range []string{"--events-ack-wait", "--live-every", "--declare-every"} {
		code, _, stderr := cli(t, ctx, "run", "--mesh", meshFile, "--state", state, flag, "500ms")
		if code != exitUsage || !strings.Contains(stderr, flag+" 500ms") {
			t.Errorf("run %s 500ms: expected exit %d naming the flag, got %d:\n%s", flag, exitUsage, code, stderr)
		}
	}
}
