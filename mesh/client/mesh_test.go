package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/clienttest"
	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// open opens person's client on the test mesh; it is closed when the test
// ends.
func open(tb testing.TB, m *clienttest.Mesh, person string, opts ...client.Option) *client.Client {
	tb.Helper()
	c, err := client.Open(clienttest.Ctx(tb, 10*time.Second), m.PersonFile(tb, person), append([]client.Option{client.WithLogger(clienttest.Discard())}, opts...)...)
	if err != nil {
		tb.Fatalf("open %s's client: %v", person, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func names(tools []wire.ToolInfo) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name())
	}
	return out
}

// expectKind fails unless err is of kind k with a message containing
// want.
func expectKind(tb testing.TB, what string, err error, k client.Kind, want string) {
	tb.Helper()
	if client.KindOf(err) != k || client.Exit(err) != k.Exit() {
		tb.Fatalf("%s: expected %v (exit %d), got %v (exit %d): %v", what, k, k.Exit(), client.KindOf(err), client.Exit(err), err)
	}
	if !strings.Contains(err.Error(), want) {
		tb.Fatalf("%s: expected a message containing %q, got %q", what, want, err)
	}
}

// TestToolsAreTheCataloguesFilteredByTheCredential: alice is offered the
// one tool she was issued, bob (an administrator) every tool; neither is
// offered the catalogue's own tool, and each tool carries its description
// and schema.
func TestToolsAreTheCataloguesFilteredByTheCredential(t *testing.T) {
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	ctx := clienttest.Ctx(t, 10*time.Second)

	alice, err := open(t, m, "alice").Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(alice); !slices.Equal(got, []string{"sensor.calibrate"}) {
		t.Fatalf("alice: expected [sensor.calibrate], got %v", got)
	}
	if !strings.HasPrefix(alice[0].Description, "Sets the sensor's reading offset") || wire.CheckArgsSchema(alice[0].Args) != nil || !strings.Contains(string(alice[0].Args), `"required":["to"]`) {
		t.Fatalf("alice's sensor.calibrate: expected its description and schema, got %+v (%s)", alice[0], alice[0].Args)
	}
	bob, err := open(t, m, "bob").Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(bob); !slices.Equal(got, []string{"sensor.calibrate", "sensor.reset"}) {
		t.Fatalf("bob: expected [sensor.calibrate sensor.reset], got %v", got)
	}
	if string(bob[1].Args) != string(wire.AnyObject) {
		t.Fatalf("sensor.reset has no schema in its manifest: expected any object, got %s", bob[1].Args)
	}
}

// TestACallReachesTheToolAndAnswers: the arguments arrive as given and
// the tool's answer comes back, without the catalogue being asked (it is
// not even running).
func TestACallReachesTheToolAndAnswers(t *testing.T) {
	m := clienttest.Start(t)
	m.Serve(t, "sensor", "calibrate", func(_ context.Context, args []byte) ([]byte, error) {
		return []byte(`{"offset":` + strings.TrimSuffix(strings.TrimPrefix(string(args), `{"to":`), `}`) + `}`), nil
	})
	out, err := open(t, m, "alice").Call(clienttest.Ctx(t, 10*time.Second), "sensor.calibrate", []byte(`{"to":21}`))
	if err != nil || string(out) != `{"offset":21}` {
		t.Fatalf("expected {\"offset\":21}, got %s, %v", out, err)
	}
}

// TestEachFailureOfACallOnTheRealServer: a handler's error, a listed tool
// nobody serves, a handler that does not answer in time, a tool the person
// has no grant for and a tool the mesh does not have: each its own kind,
// message and exit status, as the server and the SDK produce them.
func TestEachFailureOfACallOnTheRealServer(t *testing.T) {
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	release := make(chan struct{})
	m.Serve(t, "sensor", "calibrate", func(ctx context.Context, args []byte) ([]byte, error) {
		if string(args) == `{"to":"block"}` {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("released")
		}
		return nil, fmt.Errorf("offset %s out of range", args)
	})
	t.Cleanup(func() { close(release) }) // before the module closes, which waits for its handler
	alice := open(t, m, "alice", client.WithTimeout(300*time.Millisecond))
	bob := open(t, m, "bob", client.WithTimeout(300*time.Millisecond))
	ctx := context.Background() // the client's timeout bounds each call

	_, err := alice.Call(ctx, "sensor.calibrate", []byte(`{"to":99}`))
	expectKind(t, "a handler's error", err, client.KindTool, `tool sensor.calibrate failed: offset {"to":99} out of range`)
	var te *sdk.ToolError
	if !errors.As(err, &te) || te.Message != `offset {"to":99} out of range` {
		t.Fatalf("expected the SDK's ToolError wrapped, got %v", err)
	}

	_, err = bob.Call(ctx, "sensor.reset", nil)
	expectKind(t, "a listed tool nobody serves", err, client.KindNoResponders, "nobody serves sensor.reset: the catalogue lists it, but no module answers it")

	start := time.Now()
	_, err = alice.Call(ctx, "sensor.calibrate", []byte(`{"to":"block"}`))
	expectKind(t, "a handler that blocks", err, client.KindTimeout, "sensor.calibrate did not answer within 300ms")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the timeout took %s; expected about 300ms", d)
	}

	start = time.Now()
	_, err = alice.Call(ctx, "sensor.reset", nil)
	expectKind(t, "a tool alice has no grant for", err, client.KindDenied, "the bus refused person alice's call to sensor.reset: the person has no grant for it")
	if !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("expected the SDK's ErrDenied wrapped, got %v", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("the refusal took %s; expected it at once, not at the deadline", d)
	}

	_, err = alice.Call(ctx, "sensor.nope", nil)
	expectKind(t, "alice calling a tool the mesh does not have", err, client.KindNoSuchTool, "no tool sensor.nope in the mesh's catalogue (it lists: sensor.calibrate)")
	_, err = bob.Call(ctx, "nobody.calibrate", nil)
	expectKind(t, "bob calling a tool the mesh does not have", err, client.KindNoSuchTool, "no tool nobody.calibrate in the mesh's catalogue (it lists: sensor.calibrate, sensor.reset)")
}

// TestMalformedArgumentsNeverReachTheTool: on the real server too, the
// refused call sends nothing; the next good one is the tool's first.
func TestMalformedArgumentsNeverReachTheTool(t *testing.T) {
	m := clienttest.Start(t)
	var calls atomic.Int32
	m.Serve(t, "sensor", "calibrate", func(_ context.Context, args []byte) ([]byte, error) {
		calls.Add(1)
		return args, nil
	})
	alice := open(t, m, "alice")
	ctx := clienttest.Ctx(t, 10*time.Second)
	_, err := alice.Call(ctx, "sensor.calibrate", []byte(`{"to":x}`))
	expectKind(t, "malformed JSON", err, client.KindUsage, "arguments are not JSON: invalid character 'x' looking for beginning of value at offset 7")
	_, err = alice.Call(ctx, "sensor.calibrate", []byte(`[21]`))
	expectKind(t, "an array", err, client.KindUsage, "arguments are a JSON array, not an object")
	if _, err := alice.Call(ctx, "sensor.calibrate", []byte(`{"to":1}`)); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("expected the tool called once, by the good call, got %d calls", n)
	}
}

// TestTheCataloguesAbsenceIsItsOwnFailure: listing with nobody serving the
// catalogue says which module is missing; calling a tool does not need
// it.
func TestTheCataloguesAbsenceIsItsOwnFailure(t *testing.T) {
	m := clienttest.Start(t)
	alice := open(t, m, "alice")
	_, err := alice.Tools(clienttest.Ctx(t, 10*time.Second))
	expectKind(t, "no catalogue", err, client.KindNoResponders, "nobody serves the catalogue (mesh-catalog.catalog_tools): the mesh-catalog module is not running")
	_, err = alice.Call(clienttest.Ctx(t, 10*time.Second), "sensor.calibrate", nil)
	expectKind(t, "a call with no catalogue and no sensor", err, client.KindNoResponders, "(whether the mesh has such a tool is unknown: nobody serves the catalogue")
}

// TestARevokedPersonIsRefused: once the controller recomposes without
// alice, the server closes her open connection, her client says her
// credential was refused, and a fresh Open is refused at login.
func TestARevokedPersonIsRefused(t *testing.T) {
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	path := m.PersonFile(t, "alice")
	ctx := clienttest.Ctx(t, 30*time.Second)
	open, err := client.Open(ctx, path, client.WithLogger(clienttest.Discard()), client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Tools(ctx); err != nil {
		t.Fatalf("alice before revocation: %v", err)
	}

	m.Revoke(t, "alice")

	_, err = client.Open(ctx, path, client.WithLogger(clienttest.Discard()))
	expectKind(t, "a fresh Open after revocation", err, client.KindRefused, "the bus refused person alice's credential: it was revoked, or never issued")

	// The server closed her connection; nats.go gives up once the server
	// refuses the credential twice on reconnecting, after which the
	// client dials again to learn why.
	clienttest.Eventually(t, 20*time.Second, func() error {
		_, err := open.Tools(ctx)
		if client.KindOf(err) == client.KindRefused {
			return nil
		}
		return fmt.Errorf("alice's open client: expected her credential refused, got %v: %v", client.KindOf(err), err)
	})
	expectKind(t, "the open client", func() error { _, err := open.Call(ctx, "sensor.calibrate", nil); return err }(), client.KindRefused, "revoked, or never issued")
}
