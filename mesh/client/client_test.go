package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link/amqpconn"
	"github.com/meshbus/mesh/mesh/sdk"
	"github.com/meshbus/mesh/mesh/wire"
)

// fakeBus answers calls from a table and records them: what reaches the
// bus, without a bus.
type fakeBus struct {
	mu     sync.Mutex
	calls  []string
	answer func(module, tool string, args []byte) ([]byte, error)
	closed bool
}

func (f *fakeBus) Request(_ context.Context, module, tool string, args []byte) ([]byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, module+"."+tool+" "+string(args))
	f.mu.Unlock()
	return f.answer(module, tool, args)
}

func (f *fakeBus) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeBus) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// catalogueOf answers the catalogue with the tools named, else fails as
// toolErr says.
func catalogueOf(names ...string) []byte {
	var c wire.Catalogue
	for _, n := range names {
		m, t, _ := strings.Cut(n, ".")
		c.Tools = append(c.Tools, wire.ToolInfo{Module: m, Tool: t, Args: wire.AnyObject})
	}
	return c.Marshal()
}

// fakeClient is alice's client on a fake bus: she may call
// sensor.calibrate; the catalogue lists it, sensor.reset and itself; every
// other call gets toolErr.
func fakeClient(toolErr error) (*Client, *fakeBus) {
	f := &fakeBus{answer: func(module, tool string, args []byte) ([]byte, error) {
		if module == wire.CatalogSeat && tool == wire.CatalogTool {
			return catalogueOf("mesh-catalog.catalog_tools", "sensor.calibrate", "sensor.reset"), nil
		}
		if toolErr != nil {
			return nil, toolErr
		}
		return args, nil
	}}
	c := &Client{
		cred:    wire.Credential{Principal: wire.PrincipalPerson, Name: "alice", Tools: []string{"sensor.calibrate"}},
		timeout: 2 * time.Second,
		bus:     f,
		dial:    func(context.Context) (bus, error) { return nil, errors.New("no dialling in this test") },
	}
	return c, f
}

// TestMalformedArgumentsAreRefusedBeforeAnythingIsSent: a call whose
// arguments are not a JSON object never reaches the bus, and the refusal
// says what was wrong and where.
func TestMalformedArgumentsAreRefusedBeforeAnythingIsSent(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{`{"to"x}`, `arguments are not JSON: invalid character 'x' after object key at offset 6`},
		{`{"to":`, `arguments are not JSON: unexpected end of JSON input at offset 6`},
		{`xyz`, `arguments are not JSON: invalid character 'x' looking for beginning of value at offset 1`},
		{`{} {}`, `arguments are not JSON: invalid character '{' after top-level value at offset 4`},
		{`[1,2]`, `arguments are a JSON array, not an object`},
		{`"to"`, `arguments are a JSON string, not an object`},
		{`21`, `arguments are a JSON number, not an object`},
		{`null`, `arguments are a JSON null, not an object`},
		{`true`, `arguments are a JSON boolean, not an object`},
	} {
		c, f := fakeClient(nil)
		_, err := c.Call(context.Background(), "sensor.calibrate", []byte(tc.args))
		if KindOf(err) != KindUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %s: expected a KindUsage error containing %q, got %v (%v)", tc.args, tc.want, KindOf(err), err)
		}
		if got := f.sent(); len(got) != 0 {
			t.Errorf("args %s: expected nothing sent, got %q", tc.args, got)
		}
	}
}

// TestEmptyArgumentsAreTheEmptyObject: no arguments is {}, not an empty
// body a tool would have to guess at.
func TestEmptyArgumentsAreTheEmptyObject(t *testing.T) {
	for _, args := range []string{"", "  \n"} {
		c, f := fakeClient(nil)
		out, err := c.Call(context.Background(), "sensor.calibrate", []byte(args))
		if err != nil || string(out) != "{}" {
			t.Fatalf("args %q: expected {} sent and echoed, got %s, %v", args, out, err)
		}
		if got := f.sent(); len(got) != 1 || got[0] != "sensor.calibrate {}" {
			t.Fatalf("expected one call with {}, got %q", got)
		}
	}
}

// TestToolNamesAreModuleDotTool: a name not in <module>.<tool> form is
// refused before anything is sent, naming the part that is wrong.
func TestToolNamesAreModuleDotTool(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"calibrate", `tool name "calibrate": want <module>.<tool>`},
		{"", `tool name "": want <module>.<tool>`},
		{".calibrate", `tool name ".calibrate": the module:`},
		{"Sensor.calibrate", `the module:`},
		{"sensor.", `the tool: invalid name: empty tool name`},
		{"sensor.cali.brate", `the tool:`},
		{"sensor.Calibrate", `the tool:`},
	} {
		c, f := fakeClient(nil)
		_, err := c.Call(context.Background(), tc.name, nil)
		if KindOf(err) != KindUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("name %q: expected a KindUsage error containing %q, got %v", tc.name, tc.want, err)
		}
		if got := f.sent(); len(got) != 0 {
			t.Errorf("name %q: expected nothing sent, got %q", tc.name, got)
		}
	}
}

// TestEachFailureHasItsKindMessageAndExitStatus: what the SDK says of a
// call becomes one kind each, with its own message and exit status; the
// catalogue is asked only after no responders or a refusal, to tell a
// tool the mesh lacks apart.
func TestEachFailureHasItsKindMessageAndExitStatus(t *testing.T) {
	for _, tc := range []struct {
		what      string
		tool      string
		err       error
		kind      Kind
		exit      int
		want      string
		catalogue bool // the catalogue was asked after the call
	}{
		{"tool error", "sensor.calibrate", &sdk.ToolError{Module: "sensor", Tool: "calibrate", Message: "offset out of range"},
			KindTool, 3, "tool sensor.calibrate failed: offset out of range", false},
		{"no responders", "sensor.calibrate", fmt.Errorf("call: %w", sdk.ErrNoResponders),
			KindNoResponders, 4, "nobody serves sensor.calibrate: the catalogue lists it", true},
		{"timeout", "sensor.calibrate", fmt.Errorf("call: %w", sdk.ErrTimeout),
			KindTimeout, 5, "sensor.calibrate did not answer within 2s", false},
		{"denied", "sensor.reset", fmt.Errorf("call: %w", sdk.ErrDenied),
			KindDenied, 6, "the bus refused person alice's call to sensor.reset: the person has no grant for it", true},
		{"denied, no such tool", "sensor.nope", fmt.Errorf("call: %w", sdk.ErrDenied),
			KindNoSuchTool, 8, "no tool sensor.nope in the mesh's catalogue (it lists: sensor.calibrate)", true},
		{"no responders, no such tool", "sensor.nope", fmt.Errorf("call: %w", sdk.ErrNoResponders),
			KindNoSuchTool, 8, "no tool sensor.nope in the mesh's catalogue (it lists: sensor.calibrate)", true},
		{"invalid", "sensor.calibrate", fmt.Errorf("call: %w", sdk.ErrInvalid),
			KindUsage, 2, "call sensor.calibrate: call: invalid argument", false},
		{"anything else", "sensor.calibrate", errors.New("maximum payload exceeded"),
			KindFailed, 1, "call sensor.calibrate: maximum payload exceeded", false},
	} {
		c, f := fakeClient(tc.err)
		_, err := c.Call(context.Background(), tc.tool, []byte(`{"to":21}`))
		if KindOf(err) != tc.kind || Exit(err) != tc.exit || !errors.Is(err, tc.kind) {
			t.Errorf("%s: expected kind %v (exit %d), got %v (exit %d): %v", tc.what, tc.kind, tc.exit, KindOf(err), Exit(err), err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: expected a message containing %q, got %v", tc.what, tc.want, err)
		}
		if !errors.Is(err, tc.err) && !errors.As(err, new(*sdk.ToolError)) {
			t.Errorf("%s: expected the SDK's error wrapped, got %v", tc.what, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Tool != tc.tool {
			t.Errorf("%s: expected an *Error naming %s, got %#v", tc.what, tc.tool, e)
		}
		sent := f.sent()
		if asked := len(sent) == 2 && strings.HasPrefix(sent[1], "mesh-catalog.catalog_tools "); asked != tc.catalogue || len(sent) > 2 {
			t.Errorf("%s: expected the catalogue asked after the call: %v, got the calls %q", tc.what, tc.catalogue, sent)
		}
	}
}

// TestNoSuchToolIsOnlyAGuessWhenTheCatalogueIsDown: with the catalogue
// unreachable too, a call nobody answers stays no responders, and says
// the catalogue could not tell.
func TestNoSuchToolIsOnlyAGuessWhenTheCatalogueIsDown(t *testing.T) {
	c, f := fakeClient(nil)
	f.answer = func(string, string, []byte) ([]byte, error) { return nil, fmt.Errorf("call: %w", sdk.ErrNoResponders) }
	_, err := c.Call(context.Background(), "sensor.nope", nil)
	if KindOf(err) != KindNoResponders || !strings.Contains(err.Error(), "whether the mesh has such a tool is unknown: nobody serves the catalogue") {
		t.Fatalf("expected no responders, the catalogue's absence said, got %v: %v", KindOf(err), err)
	}
}

// TestKindsAreStable: the exit statuses are a contract with scripts.
func TestKindsAreStable(t *testing.T) {
	want := map[Kind]int{KindFailed: 1, KindUsage: 2, KindTool: 3, KindNoResponders: 4, KindTimeout: 5, KindDenied: 6, KindRefused: 7, KindNoSuchTool: 8}
	for k, exit := range want {
		if k.Exit() != exit || Exit(failure(k, "", nil, "x")) != exit || k.String() == "" {
			t.Errorf("kind %v: expected exit %d, got %d", k, exit, k.Exit())
		}
	}
	if Exit(nil) != 0 || KindOf(nil) != 0 {
		t.Errorf("no error: expected exit 0, got %d", Exit(nil))
	}
	if Exit(errors.New("plain")) != 1 {
		t.Errorf("an error of no kind: expected exit 1, got %d", Exit(errors.New("plain")))
	}
}

// TestToolsOffersWhatTheCredentialAllows: the catalogue's own tool is
// left out, and a person is offered what their credential lists.
func TestToolsOffersWhatTheCredentialAllows(t *testing.T) {
	c, _ := fakeClient(nil)
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name() != "sensor.calibrate" {
		t.Fatalf("alice: expected [sensor.calibrate], got %v", tools)
	}
	c.cred.Tools = []string{"*"}
	if tools, _ = c.Tools(context.Background()); len(tools) != 2 || tools[0].Name() != "sensor.calibrate" || tools[1].Name() != "sensor.reset" {
		t.Fatalf("an administrator: expected every tool but the catalogue's, got %v", tools)
	}
}

// TestACatalogueThatIsNotOneIsSaidSo: an answer ParseCatalogue refuses is
// a failure naming the catalogue, not an empty list.
func TestACatalogueThatIsNotOneIsSaidSo(t *testing.T) {
	c, f := fakeClient(nil)
	f.answer = func(string, string, []byte) ([]byte, error) { return []byte(`[]`), nil }
	_, err := c.Tools(context.Background())
	if KindOf(err) != KindFailed || !errors.Is(err, wire.ErrCatalogue) || !strings.Contains(err.Error(), "the catalogue's answer: not a catalogue") {
		t.Fatalf("expected a failure naming the catalogue's answer, got %v", err)
	}
}

// TestAClosedClientSaysSo: after Close nothing is sent.
func TestAClosedClientSaysSo(t *testing.T) {
	c, f := fakeClient(nil)
	if err := c.Close(); err != nil || !f.closed {
		t.Fatalf("close: %v, closed %v", err, f.closed)
	}
	if _, err := c.Call(context.Background(), "sensor.calibrate", nil); KindOf(err) != KindFailed || !strings.Contains(err.Error(), "the client is closed") {
		t.Fatalf("a call after close: expected the client closed, got %v", err)
	}
	if len(f.sent()) != 0 {
		t.Fatalf("expected nothing sent after close, got %q", f.sent())
	}
}

// TestAConnectionTheBusClosedIsDialledAgain: the SDK says closed without
// the client closing it only when the server refused the credential on
// reconnecting; dialling again says which.
func TestAConnectionTheBusClosedIsDialledAgain(t *testing.T) {
	c, f := fakeClient(fmt.Errorf("call: %w", sdk.ErrClosed))
	refused := failure(KindRefused, "", nil, "the bus refused person alice's credential: it was revoked, or never issued")
	c.dial = func(context.Context) (bus, error) { return nil, refused }
	if _, err := c.Call(context.Background(), "sensor.calibrate", nil); KindOf(err) != KindRefused {
		t.Fatalf("revoked: expected KindRefused, got %v", err)
	}
	fresh, _ := fakeClient(nil)
	c.dial = func(context.Context) (bus, error) { return fresh.bus, nil }
	_, err := c.Call(context.Background(), "sensor.calibrate", nil)
	if KindOf(err) != KindFailed || !strings.Contains(err.Error(), "connected again") || !f.closed {
		t.Fatalf("not revoked: expected a failure saying it connected again and the old connection closed, got %v", err)
	}
	if out, err := c.Call(context.Background(), "sensor.calibrate", []byte(`{"to":1}`)); err != nil || string(out) != `{"to":1}` {
		t.Fatalf("the call after: expected it through the new connection, got %s, %v", out, err)
	}
}

// TestOnlyAPersonsCredentialOpens: a module's, a host's credential or a
// bootstrap URL would connect as somebody else; Open refuses them before
// dialling, saying whose it is.
func TestOnlyAPersonsCredentialOpens(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		what, doc, want string
	}{
		{"a module's", string(wire.Credential{URL: wire.BusURL(wire.ModuleUser("node-a", "sensor"), "pw", "127.0.0.1:1"), Fingerprint: fp, Node: "node-a", Module: "sensor"}.Marshal()),
			"is module sensor's on node node-a, not a person's"},
		{"a host's", string(wire.Credential{URL: wire.BusURL(wire.HostUser("node-a"), "pw", "127.0.0.1:1"), Fingerprint: fp, Node: "node-a", Principal: wire.PrincipalHost, DeclarationKey: declarationKey(t)}.Marshal()),
			"is the host's of node node-a, not a person's"},
		{"an enrolment token", string(wire.Credential{URL: wire.BusURL(wire.EnrolUser("tok"), "pw", "127.0.0.1:1"), Fingerprint: fp, Principal: wire.PrincipalEnrol, Name: "tok"}.Marshal()),
			"is enrolment token tok's, not a person's"},
		{"a bootstrap URL", "tls://u:p@127.0.0.1:1", "is a bootstrap URL, not a person's credential"},
		{"not a credential", "{", "invalid credential"},
	} {
		path := filepath.Join(t.TempDir(), "cred.json")
		if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(context.Background(), path)
		if KindOf(err) != KindUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: expected KindUsage containing %q, got %v", tc.what, tc.want, err)
		}
	}
	t.Setenv(wire.EnvCredential, "")
	if _, err := Open(context.Background(), ""); KindOf(err) != KindUsage || !strings.Contains(err.Error(), "$MESH_CREDENTIAL is empty") {
		t.Errorf("no credential: expected KindUsage naming the variable, got %v", err)
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "absent.json")); KindOf(err) != KindUsage || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: expected KindUsage, got %v", err)
	}
}

// declarationKey is a host credential's controller key.
func declarationKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return wire.EncodeDeclarationKey(pub)
}

// TestACredentialForTheBrokerSaysACutoverMayHaveLeftIt: a person's
// credential for AMQP refused at login, or whose broker does not answer,
// is said to be perhaps one a cutover left behind, with what to do; one
// for NATS is not.
func TestACredentialForTheBrokerSaysACutoverMayHaveLeftIt(t *testing.T) {
	onAMQP := &Client{cred: wire.Credential{Principal: wire.PrincipalPerson, Name: "alice", URL: "amqps://alice:pw@broker:5671"}}
	onNATS := &Client{cred: wire.Credential{Principal: wire.PrincipalPerson, Name: "alice", URL: "tls://alice:pw@nats:4222"}}
	refused := fmt.Errorf("dial amqp at broker:5671 as alice: %w", errors.New("the broker refused the login"))
	refused = fmt.Errorf("%w: %w", amqpconn.ErrLoginRefused, refused)
	for _, tc := range []struct {
		c        *Client
		err      error
		kind     Kind
		saysLeft bool
	}{
		{onAMQP, refused, KindRefused, true},
		{onAMQP, errors.New("dial tcp broker:5671: connection refused"), KindFailed, true},
		{onNATS, fmt.Errorf("connect: %w", nats.ErrAuthorization), KindRefused, false},
	} {
		err := tc.c.connectError(tc.err)
		if KindOf(err) != tc.kind {
			t.Errorf("%s, %v: expected kind %v, got %v (%v)", tc.c.cred.Scheme(), tc.err, tc.kind, KindOf(err), err)
		}
		if says := strings.Contains(err.Error(), "issue it again"); says != tc.saysLeft {
			t.Errorf("%s, %v: expected a word on a cutover %v, got %q", tc.c.cred.Scheme(), tc.err, tc.saysLeft, err)
		}
	}
}
