package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshbus/mesh/internal/clienttest"
	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/client/mcpserve"
	"github.com/meshbus/mesh/mesh/wire"
)

// agent runs s on one end of an in-memory pipe and connects the MCP SDK's
// own client to the other, as an agent would; both end with the test.
func agent(tb testing.TB, s *mcpserve.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serverT, clientT := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, serverT) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts).Connect(clienttest.Ctx(tb, 10*time.Second), clientT, nil)
	if err != nil {
		cancel()
		tb.Fatalf("connect the agent: %v", err)
	}
	tb.Cleanup(func() {
		_ = cs.Close()
		cancel()
		<-done
	})
	return cs
}

// text is a result's one text content.
func text(tb testing.TB, res *mcp.CallToolResult) string {
	tb.Helper()
	if len(res.Content) != 1 {
		tb.Fatalf("expected one content, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		tb.Fatalf("expected text content, got %T", res.Content[0])
	}
	return tc.Text
}

func toolNames(res *mcp.ListToolsResult) []string {
	var out []string
	for _, t := range res.Tools {
		out = append(out, t.Name)
	}
	return out
}

// TestAnAgentListsAndCallsThePersonsTools: over the real server, the
// agent lists the person's tools with their descriptions and schemas,
// calls one, and reads each failure as a tool error naming it.
func TestAnAgentListsAndCallsThePersonsTools(t *testing.T) {
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	release := make(chan struct{})
	m.Serve(t, "sensor", "calibrate", func(ctx context.Context, args []byte) ([]byte, error) {
		var a struct{ To any }
		_ = json.Unmarshal(args, &a)
		switch a.To {
		case "block":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("released")
		case 99.0:
			return nil, errors.New("offset 99 out of range")
		}
		return []byte(fmt.Sprintf(`{"offset":%v}`, a.To)), nil
	})
	t.Cleanup(func() { close(release) })
	c, err := client.Open(clienttest.Ctx(t, 10*time.Second), m.PersonFile(t, "bob"), client.WithLogger(clienttest.Discard()), client.WithTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := agent(t, mcpserve.New(c, mcpserve.Options{Person: c.Person(), Refresh: -1}), nil)
	ctx := clienttest.Ctx(t, 10*time.Second)

	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "as person bob") {
		t.Errorf("expected the instructions to name the person, got %q", got)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(list); !slices.Equal(got, []string{"sensor.calibrate", "sensor.reset"}) {
		t.Fatalf("tools/list: expected [sensor.calibrate sensor.reset], got %v", got)
	}
	cal := list.Tools[0]
	schema, _ := json.Marshal(cal.InputSchema)
	if !strings.HasPrefix(cal.Description, "Sets the sensor's reading offset") || !strings.Contains(string(schema), `"required":["to"]`) {
		t.Fatalf("sensor.calibrate: expected the catalogue's description and schema, got %q %s", cal.Description, schema)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.calibrate", Arguments: map[string]any{"to": 21}})
	if err != nil || res.IsError || text(t, res) != `{"offset":21}` {
		t.Fatalf("tools/call: expected {\"offset\":21}, got %+v, %v", res, err)
	}

	for _, tc := range []struct {
		what, tool string
		args       any
		want       string
	}{
		{"the tool's error", "sensor.calibrate", map[string]any{"to": 99}, "tool sensor.calibrate failed: offset 99 out of range"},
		{"no responders", "sensor.reset", nil, "nobody serves sensor.reset"},
		{"timeout", "sensor.calibrate", map[string]any{"to": "block"}, "sensor.calibrate did not answer within 300ms"},
		{"arguments not an object", "sensor.calibrate", []int{21}, "arguments are a JSON array, not an object"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: expected a tool error, got a protocol error: %v", tc.what, err)
		}
		if !res.IsError || !strings.Contains(text(t, res), tc.want) {
			t.Fatalf("%s: expected IsError with %q, got %v %q", tc.what, tc.want, res.IsError, text(t, res))
		}
	}
}

// TestAToolThePersonMayNotCallIsNotListed: alice's agent does not see
// sensor.reset, and calling it anyway is the protocol's unknown tool,
// not a call the bus would refuse.
func TestAToolThePersonMayNotCallIsNotListed(t *testing.T) {
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	c, err := client.Open(clienttest.Ctx(t, 10*time.Second), m.PersonFile(t, "alice"), client.WithLogger(clienttest.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := agent(t, mcpserve.New(c, mcpserve.Options{Refresh: -1}), nil)
	ctx := clienttest.Ctx(t, 10*time.Second)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(list); !slices.Equal(got, []string{"sensor.calibrate"}) {
		t.Fatalf("alice: expected [sensor.calibrate], got %v", got)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.reset"}); err == nil || !strings.Contains(err.Error(), `unknown tool "sensor.reset"`) {
		t.Fatalf("a tool not listed: expected the protocol's unknown tool, got %v", err)
	}
}

// fakeMesh is a catalogue a test changes, and calls answered with their
// name.
type fakeMesh struct {
	mu    sync.Mutex
	tools []wire.ToolInfo
	err   error
	// callErr, when set, is every call's failure.
	callErr error
}

func (f *fakeMesh) set(tools []wire.ToolInfo, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools, f.err = tools, err
}

func (f *fakeMesh) Tools(context.Context) ([]wire.ToolInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tools), f.err
}

func (f *fakeMesh) Call(_ context.Context, name string, _ []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.callErr != nil {
		return nil, f.callErr
	}
	return []byte(`"` + name + `"`), nil
}

func tool(name, description string) wire.ToolInfo {
	m, t, _ := strings.Cut(name, ".")
	return wire.ToolInfo{Module: m, Tool: t, Description: description, Args: wire.AnyObject}
}

// TestTheListFollowsTheCatalogue: a tool the catalogue gains, loses or
// changes between listings reaches the agent as a list-changed
// notification, and the next tools/list shows it.
func TestTheListFollowsTheCatalogue(t *testing.T) {
	f := &fakeMesh{tools: []wire.ToolInfo{tool("sensor.calibrate", "one")}}
	changed := make(chan struct{}, 16)
	cs := agent(t, mcpserve.New(f, mcpserve.Options{Refresh: 20 * time.Millisecond}), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := clienttest.Ctx(t, 10*time.Second)
	list, err := cs.ListTools(ctx, nil)
	if err != nil || !slices.Equal(toolNames(list), []string{"sensor.calibrate"}) {
		t.Fatalf("expected [sensor.calibrate], got %v, %v", toolNames(list), err)
	}

	f.set([]wire.ToolInfo{tool("sensor.calibrate", "two"), tool("sensor.reset", "")}, nil)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no list-changed notification after the catalogue changed")
	}
	list, err = cs.ListTools(ctx, nil)
	if err != nil || !slices.Equal(toolNames(list), []string{"sensor.calibrate", "sensor.reset"}) || list.Tools[0].Description != "two" {
		t.Fatalf("after the change: expected calibrate (two) and reset, got %v, %v", list.Tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.reset"})
	if err != nil || text(t, res) != `"sensor.reset"` {
		t.Fatalf("the new tool: expected it callable, got %v, %v", res, err)
	}

	f.set([]wire.ToolInfo{tool("sensor.reset", "")}, nil)
	clienttest.Eventually(t, 5*time.Second, func() error {
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		if got := toolNames(list); !slices.Equal(got, []string{"sensor.reset"}) {
			return fmt.Errorf("expected [sensor.reset], got %v", got)
		}
		return nil
	})
}

// TestACatalogueThatDoesNotAnswer: before it ever answered, tools/list
// tells the agent why it has no list; after, the last list is served.
func TestACatalogueThatDoesNotAnswer(t *testing.T) {
	f := &fakeMesh{err: errors.New("nobody serves the catalogue (mesh-catalog.catalog_tools): the mesh-catalog module is not running")}
	cs := agent(t, mcpserve.New(f, mcpserve.Options{Refresh: -1}), nil)
	ctx := clienttest.Ctx(t, 10*time.Second)
	if _, err := cs.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), "list the mesh's tools: nobody serves the catalogue") {
		t.Fatalf("expected a protocol error saying why, got %v", err)
	}
	f.set([]wire.ToolInfo{tool("sensor.calibrate", "")}, nil)
	if list, err := cs.ListTools(ctx, nil); err != nil || !slices.Equal(toolNames(list), []string{"sensor.calibrate"}) {
		t.Fatalf("once it answers: expected [sensor.calibrate], got %v", err)
	}
	f.set(nil, errors.New("timed out"))
	if list, err := cs.ListTools(ctx, nil); err != nil || !slices.Equal(toolNames(list), []string{"sensor.calibrate"}) {
		t.Fatalf("when it stops answering: expected the last list, got %v", err)
	}
}

// TestEveryFailedCallIsAToolError: whatever kind of failure the client
// reports — a refusal by the bus included, which a credential listing a
// tool its grant no longer has meets — the agent reads it as a tool
// error with the client's message, not as a protocol error.
func TestEveryFailedCallIsAToolError(t *testing.T) {
	f := &fakeMesh{tools: []wire.ToolInfo{tool("sensor.calibrate", "")}}
	cs := agent(t, mcpserve.New(f, mcpserve.Options{Refresh: -1}), nil)
	ctx := clienttest.Ctx(t, 10*time.Second)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []client.Kind{client.KindDenied, client.KindRefused, client.KindFailed, client.KindNoSuchTool} {
		msg := fmt.Sprintf("what the client said of %v", k)
		f.mu.Lock()
		f.callErr = fmt.Errorf("%s: %w", msg, k)
		f.mu.Unlock()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sensor.calibrate"})
		if err != nil || !res.IsError || !strings.HasPrefix(text(t, res), msg) {
			t.Fatalf("%v: expected a tool error with the client's message, got %+v, %v", k, res, err)
		}
	}
}
