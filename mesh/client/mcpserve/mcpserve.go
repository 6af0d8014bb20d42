// Package mcpserve serves a person's tools of the mesh to an agent over
// the Model Context Protocol: a thin adapter over package client (design
// 25 §7). tools/list is the client's Tools — each MCP tool named
// "<module>.<tool>", with the catalogue's description and the JSON Schema
// of its arguments as its input schema — and tools/call is the client's
// Call with the call's arguments. Whatever a call ends in (the tool's own
// error, a refusal by the bus, nobody serving it, a timeout, even a
// credential revoked meanwhile) comes back as a tool error, its text
// saying what happened, so that the agent reads it and can correct
// itself; only what the protocol itself gets wrong is a protocol error.
//
// The list follows the catalogue rather than a snapshot of it: a push can
// add or drop tools while an agent runs for hours. A person's account may
// subscribe nothing but its inbox, so no event says the catalogue
// changed; the server asks it again on every tools/list (the agent sees
// the list as it is now) and every Refresh in between, and brings its
// tools to what it said, which the MCP SDK announces to the agent as a
// list-changed notification. A tool unchanged is not re-added, so an
// unchanged catalogue announces nothing.
package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/wire"
)

// Mesh is what the server needs of a person's client; *client.Client is
// one.
type Mesh interface {
	Tools(ctx context.Context) ([]wire.ToolInfo, error)
	Call(ctx context.Context, name string, args []byte) ([]byte, error)
}

var _ Mesh = (*client.Client)(nil)

// DefaultRefresh is how often the catalogue is asked between listings
// when Options.Refresh is zero: a push's tools reach an idle agent within
// it, at the cost of one small call.
const DefaultRefresh = 30 * time.Second

// Options configure a Server.
type Options struct {
	// Logger receives the server's lines and the MCP SDK's; nil logs
	// nothing. Never stdout: over stdio, stdout is the protocol.
	Logger *slog.Logger
	// Refresh is how often the catalogue is asked again between
	// listings; zero is DefaultRefresh, negative never.
	Refresh time.Duration
	// Person names the person the tools are called as, for the
	// instructions the agent is given.
	Person string
	// Version is the version the server reports to the agent.
	Version string
}

// Server is an MCP server over a person's client.
type Server struct {
	mesh    Mesh
	srv     *mcp.Server
	log     *slog.Logger
	refresh time.Duration

	// mu serialises Sync, so that an older answer of the catalogue never
	// overwrites a newer one.
	mu     sync.Mutex
	listed map[string]wire.ToolInfo
	synced bool
}

// New is a server of m's tools; none is listed until Sync or Run.
func New(m Mesh, o Options) *Server {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	refresh := o.Refresh
	if refresh == 0 {
		refresh = DefaultRefresh
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	instructions := "The mesh's tools, each named <module>.<tool>, called on the mesh's bus"
	if o.Person != "" {
		instructions += " as person " + o.Person
	}
	instructions += ". The list follows the mesh's catalogue: it changes when the mesh does. A failed call says why: the tool's own error, no grant, nobody serving it, or no answer in time."
	s := &Server{mesh: m, log: log, refresh: refresh, listed: map[string]wire.ToolInfo{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "mesh", Version: version}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: instructions,
		// Tools only, and their list changes; no logging capability (the
		// SDK's default): the server's lines go to its own log.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s.srv.AddReceivingMiddleware(s.listFresh)
	return s
}

// Run lists the tools, asks the catalogue again every Refresh, and serves
// one session on t (mcp.StdioTransport for mesh mcp) until it ends or ctx
// does. A catalogue that does not answer at the start is not fatal: the
// agent's first tools/list asks again, and says why if it still cannot.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	if err := s.Sync(ctx); err != nil {
		s.log.Warn("the catalogue did not answer; tools/list asks it again", "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.refresh > 0 {
		go s.poll(ctx)
	}
	return s.srv.Run(ctx, t)
}

// poll asks the catalogue every Refresh until ctx ends.
func (s *Server) poll(ctx context.Context) {
	tick := time.NewTicker(s.refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("refresh the tools", "err", err)
			}
		}
	}
}

// listFresh asks the catalogue before answering the first page of a
// tools/list. If it cannot, the last list it gave is served (and the
// failure logged); if it never gave one, the agent is told why.
func (s *Server) listFresh(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.ListToolsRequest); ok && (r.Params == nil || r.Params.Cursor == "") {
			if err := s.Sync(ctx); err != nil {
				if !s.hasSynced() {
					return nil, fmt.Errorf("list the mesh's tools: %w", err)
				}
				s.log.Warn("the catalogue did not answer; listing the tools it gave last", "err", err)
			}
		}
		return next(ctx, method, req)
	}
}

func (s *Server) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// Sync asks the catalogue and brings the server's tools to its answer:
// a tool gone is removed, a tool new or changed (added again), and each
// change announced to the agent as a list-changed notification.
func (s *Server) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tools, err := s.mesh.Tools(ctx)
	if err != nil {
		return err
	}
	now := make(map[string]wire.ToolInfo, len(tools))
	for _, t := range tools {
		now[t.Name()] = t
	}
	var gone []string
	for name := range s.listed {
		if _, ok := now[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
		s.log.Info("tools gone from the catalogue", "tools", gone)
	}
	for name, t := range now {
		if old, ok := s.listed[name]; ok && same(old, t) {
			continue
		}
		s.srv.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: json.RawMessage(t.Args)}, s.call(name))
	}
	s.listed, s.synced = now, true
	return nil
}

// same reports whether a tool is listed as it was.
func same(a, b wire.ToolInfo) bool {
	return a.Description == b.Description && bytes.Equal(a.Args, b.Args)
}

// call is the handler of tool name: the client's Call, its failure a
// tool error whose text is the client's message.
func (s *Server) call(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out, err := s.mesh.Call(ctx, name, req.Params.Arguments)
		if err != nil {
			kind := client.KindOf(err)
			s.log.Info("tool call failed", "tool", name, "kind", kind.String(), "err", err)
			if kind == client.KindNoSuchTool {
				// The catalogue no longer lists it: the agent is shown so.
				go s.resync()
			}
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}, nil
	}
}

// resync is a Sync of its own, bounded, for a handler that must not wait
// for it.
func (s *Server) resync() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Sync(ctx); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("refresh the tools", "err", err)
	}
}
