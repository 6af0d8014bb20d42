package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshbus/mesh/internal/clienttest"
	"github.com/meshbus/mesh/internal/testutil"
)

// agentImpl is how the test's agent names itself.
var agentImpl = &mcp.Implementation{Name: "test-agent", Version: "1"}

// listAndCall is what an agent does first: list the tools, call one, and
// read a failed call as a tool error.
func listAndCall(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := clienttest.Ctx(t, 20*time.Second)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "sensor.calibrate" || !strings.HasPrefix(list.Tools[0].Description, "Sets the sensor's") {
		t.Fatalf("tools/list: expected alice's sensor.calibrate, got %+v", list.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.calibrate", Arguments: map[string]any{"to": 21}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != `{"offset":21}` {
		t.Fatalf("tools/call: expected {\"offset\":21}, got %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.calibrate", Arguments: map[string]any{"to": 99}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "tool sensor.calibrate failed: offset 99 out of range") {
		t.Fatalf("a tool's error: expected IsError naming it, got %+v, %v", res, err)
	}
}

// TestMCPStdoutIsOnlyTheProtocol runs mesh mcp in-process on pipes: the
// agent lists and calls, every line the program wrote to stdout is a
// JSON-RPC message, and closing stdin ends it with exit 0.
func TestMCPStdoutIsOnlyTheProtocol(t *testing.T) {
	m := sensorMesh(t)
	alice := m.PersonFile(t, "alice")
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var wrote testutil.SyncBuffer
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), []string{"mcp", "--credential", alice}, stdinR, io.MultiWriter(stdoutW, &wrote), &stderr)
		_ = stdoutW.Close()
		done <- code
	}()
	cs, err := mcp.NewClient(agentImpl, nil).Connect(clienttest.Ctx(t, 20*time.Second), &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	listAndCall(t, cs)
	_ = cs.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("expected exit 0 when the agent closed stdin, got %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mesh mcp did not end when the agent closed stdin")
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(wrote.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Fatalf("stdout carried a line that is not JSON-RPC: %q", sc.Text())
		}
		lines++
	}
	if lines < 4 {
		t.Fatalf("expected at least the answers to initialize, tools/list and two tools/call, got %d lines", lines)
	}
	if !strings.Contains(stderr.String(), `"msg":"serving the person's tools over stdio"`) {
		t.Fatalf("expected the log on stderr, got %q", stderr.String())
	}
}

// buildMesh builds this program into a directory of the test's.
func buildMesh(tb testing.TB) string {
	tb.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		tb.Skipf("no go tool to build mesh with: %v", err)
	}
	bin := filepath.Join(tb.TempDir(), "mesh")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build mesh: %v\n%s", err, out)
	}
	return bin
}

// agentOf starts the built mesh mcp as an agent does (CommandTransport)
// with args, and connects; the session is closed when the test ends.
func agentOf(tb testing.TB, bin string, stderr io.Writer, args ...string) (*mcp.ClientSession, *exec.Cmd) {
	tb.Helper()
	cmd := exec.Command(bin, append([]string{"mcp"}, args...)...)
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(agentImpl, nil).Connect(clienttest.Ctx(tb, 20*time.Second), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		tb.Fatalf("start mesh mcp: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs, cmd
}

// TestAnAgentRunsTheMeshBinary builds mesh and runs mesh mcp as an agent
// would, over its stdin and stdout; closing the session ends it with exit
// 0.
func TestAnAgentRunsTheMeshBinary(t *testing.T) {
	m := sensorMesh(t)
	bin := buildMesh(t)
	var stderr testutil.SyncBuffer
	cs, cmd := agentOf(t, bin, &stderr, "--credential", m.PersonFile(t, "alice"), "--refresh", "0")
	listAndCall(t, cs)
	if err := cs.Close(); err != nil {
		t.Fatalf("close the session: expected mesh mcp to exit 0, got %v\n%s", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("expected exit 0, got %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"person":"alice"`) {
		t.Fatalf("expected the log on stderr to name alice, got %s", stderr.String())
	}
}

// TestTheMeshBinaryRefusesARevokedPerson: mesh mcp with a revoked
// credential does not start a session; it exits 7 saying why.
func TestTheMeshBinaryRefusesARevokedPerson(t *testing.T) {
	m := sensorMesh(t)
	alice := m.PersonFile(t, "alice")
	m.Revoke(t, "alice")
	bin := buildMesh(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "mcp", "--credential", alice)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "mesh mcp: the bus refused person alice's credential: it was revoked, or never issued") {
		t.Fatalf("expected exit 7 and the reason on stderr, nothing on stdout, got %v, %q, %q", err, stdout.String(), stderr.String())
	}
}

// BenchmarkMCPToolsCallOverStdio is one tools/call from an agent to the
// built mesh mcp over its stdio, through the real server in-process, to a
// test handler and back: what an agent waits for each call.
func BenchmarkMCPToolsCallOverStdio(b *testing.B) {
	m := clienttest.Start(b)
	m.ServeCatalogue(b)
	m.Serve(b, "sensor", "calibrate", func(_ context.Context, args []byte) ([]byte, error) { return args, nil })
	bin := buildMesh(b)
	cs, _ := agentOf(b, bin, io.Discard, "--credential", m.PersonFile(b, "alice"), "--refresh", "0")
	ctx := clienttest.Ctx(b, 10*time.Minute)
	list, err := cs.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(list.Tools, func(t *mcp.Tool) bool { return t.Name == "sensor.calibrate" }) {
		b.Fatalf("tools/list: %v, %v", list, err)
	}
	params := &mcp.CallToolParams{Name: "sensor.calibrate", Arguments: map[string]any{"to": 21}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("tools/call: %+v, %v", res, err)
		}
	}
}
