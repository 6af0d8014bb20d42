package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshbus/mesh/internal/clienttest"
	"github.com/meshbus/mesh/mesh/wire"
)

// sensorMesh is the test mesh with its catalogue and a sensor.calibrate
// that answers {"offset":N} for {"to":N}, fails for 99 and without "to",
// and blocks for "block" until the test ends.
func sensorMesh(t testing.TB) *clienttest.Mesh {
	t.Helper()
	m := clienttest.Start(t)
	m.ServeCatalogue(t)
	release := make(chan struct{})
	m.Serve(t, "sensor", "calibrate", func(ctx context.Context, args []byte) ([]byte, error) {
		var a struct{ To any }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		switch a.To {
		case nil:
			return nil, fmt.Errorf("to is required, got %s", args)
		case "block":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("released")
		case 99.0:
			return nil, errors.New("offset 99 out of range")
		}
		return fmt.Appendf(nil, `{"offset":%v}`, a.To), nil
	})
	t.Cleanup(func() { close(release) }) // before the sensor closes: it waits for its handler
	return m
}

// TestToolsListsWhatThePersonMayCall: a line per tool, or the catalogue
// document with --json; the credential from --credential or
// $MESH_CREDENTIAL.
func TestToolsListsWhatThePersonMayCall(t *testing.T) {
	m := sensorMesh(t)
	code, stdout, stderr := cli(t, "", "tools", "--credential", m.PersonFile(t, "alice"))
	if code != exitOK || stderr != "" {
		t.Fatalf("alice: %d %q", code, stderr)
	}
	if want := "sensor.calibrate  Sets the sensor's reading offset and answers the offset now in force.\n"; stdout != want {
		t.Fatalf("alice: expected %q, got %q", want, stdout)
	}
	t.Setenv(wire.EnvCredential, m.PersonFile(t, "bob"))
	code, stdout, _ = cli(t, "", "tools", "--json")
	cat, err := wire.ParseCatalogue([]byte(stdout))
	if code != exitOK || err != nil || len(cat.Tools) != 2 || cat.Tools[0].Name() != "sensor.calibrate" || cat.Tools[1].Name() != "sensor.reset" {
		t.Fatalf("bob --json: expected a catalogue of calibrate and reset, got %d %q %v", code, stdout, err)
	}
}

// TestCallPrintsTheAnswerOrSaysWhatHappened: each outcome of a call is
// its own exit status and its own line on stderr, with nothing on stdout
// but an answer.
func TestCallPrintsTheAnswerOrSaysWhatHappened(t *testing.T) {
	m := sensorMesh(t)
	alice, bob := m.PersonFile(t, "alice"), m.PersonFile(t, "bob")
	module := m.CredFile(t, wire.ModuleUser(clienttest.Node, "sensor"))

	code, stdout, stderr := cli(t, "", "call", "--credential", alice, "sensor.calibrate", `{"to":21}`)
	if code != exitOK || stdout != "{\"offset\":21}\n" || stderr != "" {
		t.Fatalf("a call: expected the answer, got %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, `{"to":7}`, "call", "sensor.calibrate", "-", "--credential", alice)
	if code != exitOK || stdout != "{\"offset\":7}\n" {
		t.Fatalf("arguments from stdin, flags after: expected the answer, got %d %q", code, stdout)
	}

	for _, tc := range []struct {
		what string
		args []string
		exit int
		want string
	}{
		{"no arguments is {}", []string{"--credential", alice, "sensor.calibrate"}, 3, "mesh call: tool sensor.calibrate failed: to is required, got {}"},
		{"the tool's error", []string{"--credential", alice, "sensor.calibrate", `{"to":99}`}, 3, "mesh call: tool sensor.calibrate failed: offset 99 out of range"},
		{"no responders", []string{"--credential", bob, "sensor.reset"}, 4, "mesh call: nobody serves sensor.reset: the catalogue lists it, but no module answers it"},
		{"timeout", []string{"--credential", alice, "--timeout", "500ms", "sensor.calibrate", `{"to":"block"}`}, 5, "mesh call: sensor.calibrate did not answer within 500ms"},
		{"no grant", []string{"--credential", alice, "sensor.reset"}, 6, "mesh call: the bus refused person alice's call to sensor.reset: the person has no grant for it"},
		{"no such tool", []string{"--credential", alice, "sensor.nope"}, 8, "mesh call: no tool sensor.nope in the mesh's catalogue (it lists: sensor.calibrate)"},
		{"malformed JSON", []string{"--credential", alice, "sensor.calibrate", `{"to"x}`}, 2, "mesh call: arguments are not JSON: invalid character 'x' after object key at offset 6"},
		{"not an object", []string{"--credential", alice, "sensor.calibrate", `[21]`}, 2, "mesh call: arguments are a JSON array, not an object"},
		{"a bad name", []string{"--credential", alice, "calibrate"}, 2, `mesh call: tool name "calibrate": want <module>.<tool>`},
		{"a module's credential", []string{"--credential", module, "sensor.calibrate"}, 2, "is module sensor's on node node-a, not a person's"},
	} {
		code, stdout, stderr := cli(t, "", append([]string{"call"}, tc.args...)...)
		if code != tc.exit || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: expected exit %d and %q on stderr, got %d, stdout %q, stderr %q", tc.what, tc.exit, tc.want, code, stdout, stderr)
		}
	}

	m.Revoke(t, "alice")
	code, stdout, stderr = cli(t, "", "call", "--credential", alice, "sensor.calibrate", `{"to":1}`)
	if code != 7 || stdout != "" || !strings.Contains(stderr, "mesh call: the bus refused person alice's credential: it was revoked, or never issued") {
		t.Fatalf("revoked: expected exit 7 saying so, got %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := cli(t, "", "tools", "--credential", alice); code != 7 || !strings.Contains(stderr, "mesh tools: the bus refused person alice's credential") {
		t.Fatalf("revoked, tools: expected exit 7, got %d %q", code, stderr)
	}
}

// TestCallChecksItsInputBeforeConnecting: a malformed tool name or
// arguments are bad usage (exit 2) whether or not the bus answers; with
// the bus down they were "no servers available" (exit 1) because the call
// connected first (issue 18).
func TestCallChecksItsInputBeforeConnecting(t *testing.T) {
	m := clienttest.Start(t)
	alice := m.PersonFile(t, "alice")
	m.Srv.Shutdown()
	m.Srv.WaitForShutdown()
	for _, tc := range []struct {
		what string
		args []string
		want string
	}{
		{"a bad name", []string{"calibrate"}, `mesh call: tool name "calibrate": want <module>.<tool>`},
		{"a bad tool", []string{"sensor.Calibrate!"}, `mesh call: tool name "sensor.Calibrate!": the tool`},
		{"malformed JSON", []string{"sensor.calibrate", `{"to"x}`}, "mesh call: arguments are not JSON"},
		{"not an object", []string{"sensor.calibrate", `[21]`}, "mesh call: arguments are a JSON array, not an object"},
	} {
		code, stdout, stderr := cli(t, "", append([]string{"call", "--credential", alice, "--timeout", "2s"}, tc.args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s, the bus down: expected exit 2 and %q on stderr, got %d, stdout %q, stderr %q", tc.what, tc.want, code, stdout, stderr)
		}
	}
	// A well-formed call with the bus down is the bus's failure.
	if code, _, stderr := cli(t, "", "call", "--credential", alice, "--timeout", "2s", "sensor.calibrate", `{"to":1}`); code != exitFailed {
		t.Errorf("a good call, the bus down: expected exit 1, got %d %q", code, stderr)
	}
}

// terminalHostile is what a tool's module may put in an answer, an error
// or a description: screen clearing, a window title, the clipboard (OSC
// 52), a C1 CSI, DEL, a bidi override, a forged line.
const terminalHostile = "\x1b[2J\x1b]0;title\x07\x1b]52;c;ZXZpbA==\x1b\\\u009b1m\x7f\u202eevil\nforged"

// TestCallAndToolsPrintNothingATerminalActsOn: an answer, a tool's error
// and the catalogue's descriptions are other principals' bytes; printed,
// they are escaped, a JSON answer and tools --json staying the same valid
// JSON (issue 18).
func TestCallAndToolsPrintNothingATerminalActsOn(t *testing.T) {
	m := clienttest.Start(t)
	cat := m.Desc.Catalogue()
	for i := range cat.Tools {
		cat.Tools[i].Description = "calibrates " + terminalHostile
	}
	m.ServeCatalogueOf(t, cat)
	m.Serve(t, "sensor", "calibrate", func(_ context.Context, args []byte) ([]byte, error) {
		if strings.Contains(string(args), "fail") {
			return nil, errors.New("failed " + terminalHostile)
		}
		return json.Marshal(map[string]string{"said": terminalHostile})
	})
	alice := m.PersonFile(t, "alice")
	inert := func(what, out string) {
		t.Helper()
		for i, c := range []byte(out) {
			if c < 0x20 && c != '\n' || c == 0x7f {
				t.Errorf("%s: byte %#x at %d reaches the terminal: %q", what, c, i, out)
				return
			}
		}
		if strings.ContainsAny(out, "\u009b\u202e") || strings.Contains(out, "\nforged") {
			t.Errorf("%s: a C1 control, a bidi override or a forged line reaches the terminal: %q", what, out)
		}
	}

	code, stdout, stderr := cli(t, "", "call", "--credential", alice, "sensor.calibrate", `{"to":1}`)
	var answer map[string]string
	if code != exitOK || json.Unmarshal([]byte(stdout), &answer) != nil || answer["said"] != terminalHostile {
		t.Fatalf("call: expected the answer as valid JSON saying the same, got %d %q %q", code, stdout, stderr)
	}
	inert("call's answer", stdout)

	code, stdout, stderr = cli(t, "", "call", "--credential", alice, "sensor.calibrate", `{"to":"fail"}`)
	if code != 3 || !strings.Contains(stderr, `failed \x1b[2J`) {
		t.Fatalf("call failing: expected exit 3 and the tool's error escaped, got %d %q %q", code, stdout, stderr)
	}
	inert("call's error", stderr)

	code, stdout, stderr = cli(t, "", "tools", "--credential", alice)
	if code != exitOK || !strings.Contains(stdout, `calibrates \x1b[2J`) {
		t.Fatalf("tools: expected the description escaped, got %d %q %q", code, stdout, stderr)
	}
	inert("tools", stdout)

	code, stdout, _ = cli(t, "", "tools", "--json", "--credential", alice)
	got, err := wire.ParseCatalogue([]byte(stdout))
	if code != exitOK || err != nil || len(got.Tools) == 0 || got.Tools[0].Description != "calibrates "+terminalHostile {
		t.Fatalf("tools --json: expected the catalogue saying the same, got %d %q %v", code, stdout, err)
	}
	inert("tools --json", stdout)
}
