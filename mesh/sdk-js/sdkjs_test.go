package sdkjs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/link/natsplane"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestNodeSuites runs the JavaScript suites with the machine's Node
// (node --test): the client's unit suites drive it with bytes alone, no
// socket and no port. Without a Node of 18 or later it is skipped, saying
// so; CI installs Debian bookworm's where there is none.
func TestNodeSuites(t *testing.T) {
	node := requireNode(t)
	readFiles(t, "src", "test", "driver", filepath.Join("..", "..", "features", "fixtures"))
	t.Run("unit", func(t *testing.T) { runSuites(t, node, nil, "test/*.test.js") })
	t.Run("against nats-server", func(t *testing.T) {
		runSuites(t, node, []string{"MESH_E2E=" + e2eEnv(t)}, "test/e2e/*.test.js")
	})
}

// requireNode is the machine's Node, 18 or later; without one the test is
// skipped, saying so (CI installs one).
func requireNode(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("the JavaScript SDK's suites are not run: no node on PATH (Debian: apt-get install nodejs)")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("node --version printed %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 18 {
		t.Skipf("the JavaScript SDK's suites are not run: node %s is older than 18", out)
	}
	return node
}

// readFiles opens every file under dirs. go test caches a passing result
// by the files the test opens; node reads the JavaScript in a process of
// its own, so it is opened here, or a changed file would pass from the
// cache.
func readFiles(t testing.TB, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// runSuites runs node --test on the suites glob names and fails with
// their output unless every test passed; with env (what the suites need
// is given) a test that skipped is a failure too.
func runSuites(t *testing.T, node string, env []string, glob string) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no suites match %s (%v)", glob, err)
	}
	dir := glob
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test"}, files...)...)
	cmd.Env = append(os.Environ(), env...)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test %s: %v\n%s", dir, err, res)
	}
	pass := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(res)
	skipped := regexp.MustCompile(`(?m)^# skipped (\d+)$`).FindSubmatch(res)
	if pass == nil || skipped == nil {
		t.Fatalf("node --test %s printed no counts:\n%s", dir, res)
	}
	if env != nil && string(skipped[1]) != "0" {
		t.Fatalf("node --test %s skipped %s tests it was given what they need for:\n%s", dir, skipped[1], res)
	}
	t.Logf("node --test %s: %s passed, %s skipped", dir, pass[1], skipped[1])
}

// e2eEnv starts the real nats-server in-process with the sample mesh's
// composed configuration and spells, for the suite, where the bus is and
// each principal's credential.
func e2eEnv(t *testing.T) string {
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	assertStreams(t, srv, m)
	type cred struct {
		URL         string `json:"url"`
		Fingerprint string `json:"fingerprint"`
		Inbox       string `json:"inbox"`
		// Document is the credential document a host would give the
		// principal, as the SDK reads it.
		Document string `json:"document"`
	}
	creds := map[string]cred{}
	for user, c := range srv.Creds {
		creds[user] = cred{URL: c.URL, Fingerprint: c.Fingerprint, Inbox: c.Inbox(), Document: string(c.Marshal())}
	}
	b, err := json.Marshal(map[string]any{"creds": creds, "restartable": restartableBus(t, m)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertStreams has the controller's own code assert the mesh's streams
// and consumers on srv, as a controller would before any module runs.
func assertStreams(t testing.TB, srv *natstest.Server, m *meshdesc.Mesh) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	jss := natsplane.JetStreams{}
	for _, user := range []string{wire.ControllerUser, wire.ControllerMeshUser} {
		nc, err := srv.Dial(ctx, user)
		if err != nil {
			t.Fatalf("dial as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		jss[srv.Creds[user].Account()] = js
	}
	if _, err := natsplane.Assert(ctx, jss, natsplane.DesiredState(m, natsplane.DefaultPolicy()), nil); err != nil {
		t.Fatalf("assert streams and consumers: %v", err)
	}
}

// restartableBus starts a second bus with the sample mesh's configuration
// for the reconnect suite to stop and start again on its port, so that
// the bus of the other suites, which may run at the same time, is never
// taken from under them. The suite says what to do on a loopback port, a
// line at a time: "stop", "start" (the same configuration on the same
// port) or "ldm" (lame duck: the clients are told at once and closed
// after a grace period of 2 s, then the server stops); each is answered
// "ok" once done, or "error: " and why.
func restartableBus(t *testing.T, m *meshdesc.Mesh) map[string]any {
	first := natstest.Start(t, m)
	_, port, err := net.SplitHostPort(first.Addr())
	if err != nil {
		t.Fatal(err)
	}
	b := &restartable{config: first.ConfigPath}
	if b.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	// Ours from the start, so that every server on the port has the
	// suite's lame-duck timings.
	first.Shutdown()
	first.WaitForShutdown()
	if err := b.start(); err != nil {
		t.Fatal(err)
	}
	// Its streams and consumers, on the store every later start finds.
	assertStreams(t, first, m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ln.Close()
		_ = b.stop()
	})
	go b.serve(ln)
	creds := map[string]map[string]string{}
	for user, c := range first.Creds {
		creds[user] = map[string]string{"url": c.URL, "fingerprint": c.Fingerprint, "inbox": c.Inbox(), "document": string(c.Marshal())}
	}
	return map[string]any{"control": ln.Addr().String(), "creds": creds}
}

type restartable struct {
	mu     sync.Mutex
	config string
	port   int
	srv    *server.Server
}

func (b *restartable) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			lines := bufio.NewScanner(conn)
			for lines.Scan() {
				var err error
				switch cmd := lines.Text(); cmd {
				case "stop":
					err = b.stop()
				case "start":
					err = b.start()
				case "ldm":
					err = b.lameDuck()
				default:
					err = fmt.Errorf("no command %q", cmd)
				}
				answer := "ok"
				if err != nil {
					answer = "error: " + err.Error()
				}
				if _, err := fmt.Fprintln(conn, answer); err != nil {
					return
				}
			}
		}()
	}
}

func (b *restartable) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		// A lame duck stops of itself; it is waited for, within reason.
		stopped := make(chan struct{})
		go func() {
			b.srv.WaitForShutdown()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			return errors.New("the server before is still running")
		}
	}
	opts, err := server.ProcessConfigFile(b.config)
	if err != nil {
		return err
	}
	opts.Port = b.port
	opts.NoSigs, opts.NoLog = true, true
	opts.LameDuckGracePeriod, opts.LameDuckDuration = 2*time.Second, 3*time.Second
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("not taking connections on port %d within 10s", b.port)
	}
	b.srv = srv
	return nil
}

func (b *restartable) stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return errors.New("not started")
	}
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	return nil
}

func (b *restartable) lameDuck() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return errors.New("not started")
	}
	go b.srv.LameDuckShutdown()
	return nil
}
