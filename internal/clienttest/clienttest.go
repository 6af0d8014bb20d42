// Package clienttest raises, for the tests of a person's client
// (mesh/client, its MCP adapter and cmd/mesh), a small mesh on the real
// nats-server in-process with its composed grants: the modules' tools
// served by test handlers, the catalogue served from the description,
// and the persons' credentials written where a client reads them.
package clienttest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// Description is the test mesh: sensor serves calibrate and reset, the
// catalogue module serves the catalogue, alice may call sensor.calibrate
// only, and bob, an administrator, every tool. It is its own rather than
// features/testdata/mesh.yaml so that a tool the catalogue lists and a
// person may not call exists, whatever the beds' sample becomes.
const Description = `
name: persons
bus:
  names: [nats, localhost, 127.0.0.1]
  monitor: nats
nodes:
  - name: node-a
    modules: [sensor, mesh-catalog]
modules:
  - name: sensor
    tools: [calibrate, reset]
    tool_docs:
      calibrate:
        description: Sets the sensor's reading offset and answers the offset now in force.
        args:
          type: object
          properties:
            to: {type: number, description: "the offset, in the reading's unit"}
          required: [to]
          additionalProperties: false
      reset:
        description: Forgets the sensor's offset.
  - name: mesh-catalog
    seat: mesh-catalog
    tools: [catalog_tools]
    tool_docs:
      catalog_tools:
        description: Lists every tool of the mesh with its description and the JSON Schema of its arguments.
        args: {type: object, additionalProperties: false}
persons:
  - name: alice
    tools: [sensor.calibrate]
  - name: bob
    tools: ["*"]
`

// Node is the node every module of the test mesh runs on.
const Node = "node-a"

// Mesh is the test mesh running.
type Mesh struct {
	// Desc is the description it was composed from.
	Desc *meshdesc.Mesh
	// Srv is the server.
	Srv *natstest.Server
}

// Start starts the test mesh's server; it stops when the test ends.
func Start(tb testing.TB) *Mesh {
	tb.Helper()
	m, err := meshdesc.Parse([]byte(Description))
	if err != nil {
		tb.Fatalf("the test mesh's description: %v", err)
	}
	return &Mesh{Desc: m, Srv: natstest.Start(tb, m)}
}

// CredFile writes user's credential document to a 0600 file of the
// test's, as the controller (or mesh credential open) would, and returns
// its path.
func (m *Mesh) CredFile(tb testing.TB, user string) string {
	tb.Helper()
	cred, ok := m.Srv.Creds[user]
	if !ok {
		tb.Fatalf("the test mesh has no user %q", user)
	}
	path := filepath.Join(tb.TempDir(), user+".json")
	if err := os.WriteFile(path, cred.Marshal(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// PersonFile is CredFile for a person.
func (m *Mesh) PersonFile(tb testing.TB, name string) string {
	tb.Helper()
	return m.CredFile(tb, wire.PersonUser(name))
}

// Serve connects as module and serves its tool with h until the test
// ends. Handlers that block should end when ctx does, or when the test
// does: the module's close waits for them.
func (m *Mesh) Serve(tb testing.TB, module, tool string, h sdk.ToolHandler) {
	tb.Helper()
	mod := m.connect(tb, module)
	if err := mod.Handle(tool, h); err != nil {
		tb.Fatalf("serve %s.%s: %v", module, tool, err)
	}
}

// ServeCatalogue serves the catalogue the description derives, as the
// catalogue module does.
func (m *Mesh) ServeCatalogue(tb testing.TB) {
	tb.Helper()
	m.ServeCatalogueOf(tb, m.Desc.Catalogue())
}

// ServeCatalogueOf serves cat as the catalogue.
func (m *Mesh) ServeCatalogueOf(tb testing.TB, cat wire.Catalogue) {
	tb.Helper()
	answer := cat.Marshal()
	m.Serve(tb, wire.CatalogSeat, wire.CatalogTool, func(context.Context, []byte) ([]byte, error) { return answer, nil })
}

// connect connects as module on Node through the SDK; it is closed when
// the test ends. The identity variables the SDK overwrites are restored
// after the test.
func (m *Mesh) connect(tb testing.TB, module string) *sdk.Module {
	tb.Helper()
	for _, name := range []string{wire.EnvNode, wire.EnvModule} {
		tb.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	path := m.CredFile(tb, wire.ModuleUser(Node, module))
	mod, err := sdk.Connect(Ctx(tb, 10*time.Second), path, sdk.WithLogger(Discard()))
	if err != nil {
		tb.Fatalf("connect as %s: %v", module, err)
	}
	tb.Cleanup(func() { _ = mod.Close() })
	return mod
}

// Revoke recomposes the server's configuration without the person, as
// the controller does when a person is revoked, and reloads it: the
// server closes the person's connections.
func (m *Mesh) Revoke(tb testing.TB, person string) {
	tb.Helper()
	next := *m.Desc
	next.Persons = slices.DeleteFunc(slices.Clone(m.Desc.Persons), func(p meshdesc.Person) bool { return p.Name == person })
	if len(next.Persons) == len(m.Desc.Persons) {
		tb.Fatalf("the test mesh has no person %q", person)
	}
	m.Srv.Apply(&next)
	m.Desc = &next
}

// Ctx is a context ending after d or with the test.
func Ctx(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Discard is a logger that says nothing.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Eventually polls check every 20ms until it returns nil, and fails the
// test with its last error if within passes first.
func Eventually(tb testing.TB, within time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not so within %s: %v", within, err)
		}
		<-tick.C
	}
}
