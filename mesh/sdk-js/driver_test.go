package sdkjs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	proto "github.com/meshbus/mesh/conformance/driverproto"
	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// The JavaScript driver (driver/main.js) is held to the protocol the bed
// reads with (conformance/driverproto): its command lines are judged as
// driverproto.ParseCommand judges them, its lines parse with
// driverproto.ParseOutput, and it answers "not implemented" for exactly
// the capabilities the SDK does not claim.

// runDriver runs the driver with args and env added to this process's,
// returning its exit status and output.
func runDriver(t *testing.T, node string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(node, append([]string{filepath.Join("driver", "main.js")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("run the driver: %v", err)
	}
	return 0, out.String(), errOut.String()
}

func TestTheDriverReadsCommandLinesAsTheProtocolDoes(t *testing.T) {
	node := requireNode(t)
	readFiles(t, "driver", "src")
	claims := map[string]bool{"connection": true, "events": true}
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"connect", "extra"}, {"emit"}, {"emit", "--bogus"}, {"emit", "--fixture"},
		{"consume", "--pattern", "a", "--timeout", "1m30s"}, {"consume", "--pattern", "a", "--fail", "--fail-for", "2s"},
		{"consume", "--pattern", "a", "--redeliver-after", "-1s"}, {"consume", "--pattern", "a", "--fail", "--redeliver-after", "250ms", "--count", "1", "--timeout", "1s"},
		{"consume", "--pattern", "a", "--count", "0"}, {"consume", "--count", "1"}, {"consume", "--pattern", "a", "--count", "x"},
		{"serve", "--duration", "1s"}, {"serve", "--tool", "t", "--fail", "m", "--panic"}, {"serve", "--tool", "t", "--duration", "1s"},
		{"call", "--module", "m", "--tool", "t", "--args", "{", "--timeout", "1s"},
		{"call", "--module", "m", "--tool", "t", "--args", "{}", "--timeout", "1s"},
		{"grant"}, {"grant", "--file", "f"},
	} {
		cmd, perr := proto.ParseCommand(args)
		code, stdout, stderr := runDriver(t, node, []string{"MESH_CREDENTIAL=/nonexistent"}, args...)
		switch {
		case perr != nil:
			if code != proto.ExitUsage || stdout != "" {
				t.Errorf("%q: the protocol refuses it (%v); expected exit %d and nothing on stdout, got %d: %q %s", args, perr, proto.ExitUsage, code, stdout, stderr)
			}
		case !claims[string(cmd.Capability())]:
			if code != proto.ExitUnsupported || stdout != "" {
				t.Errorf("%q: %s is not claimed; expected exit %d and nothing on stdout, got %d: %q", args, cmd.Capability(), proto.ExitUnsupported, code, stdout)
			}
		default:
			// Claimed, and the credential is missing: it ran, and failed.
			lines, err := proto.ParseOutput(stdout)
			if code != proto.ExitRan || err != nil {
				t.Errorf("%q: expected exit 0 and protocol lines, got %d (%v): %q", args, code, err, stdout)
				continue
			}
			if done, err := proto.Closing(lines); err != nil || done.OK || done.Class != proto.ClassCredential {
				t.Errorf("%q: expected a failed done of class %s, got %+v (%v)", args, proto.ClassCredential, done, err)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"emit", "-h"}, {"consume", "--help"}, {"serve", "--help"}} {
		code, stdout, _ := runDriver(t, node, nil, args...)
		if code != proto.ExitRan || stdout != proto.Usage("driver") {
			t.Errorf("%q: expected exit 0 and the protocol's usage on stdout, got %d:\n%s", args, code, stdout)
		}
	}
}

// TestTheDriverConnectsAndReportsItsIdentity runs connect against the
// real server: the identity line as the bed reads it, the environment as
// the SDK left it (overwritten where it disagreed).
func TestTheDriverConnectsAndReportsItsIdentity(t *testing.T) {
	node := requireNode(t)
	readFiles(t, "driver", "src")
	m, err := meshdesc.Load(filepath.Join("..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, m)
	cred := filepath.Join(t.TempDir(), "credential.json")
	if err := os.WriteFile(cred, srv.Creds[wire.ModuleUser("node-a", "sensor")].Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runDriver(t, node, []string{"MESH_CREDENTIAL=" + cred, "MESH_NODE=node-z", "MESH_MODULE=impostor"}, "connect")
	lines, err := proto.ParseOutput(stdout)
	if code != proto.ExitRan || err != nil {
		t.Fatalf("expected exit 0 and protocol lines, got %d (%v): %q %s", code, err, stdout, stderr)
	}
	id, ok := proto.First[proto.Identity](lines)
	want := proto.Identity{Node: "node-a", Module: "sensor", EnvNode: "node-a", EnvModule: "sensor"}
	if !ok || id != want {
		t.Fatalf("expected %+v, got %+v in %q", want, id, stdout)
	}
	if done, err := proto.Closing(lines); err != nil || !done.OK {
		t.Fatalf("expected a done ok, got %+v (%v)", done, err)
	}
}
