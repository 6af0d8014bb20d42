package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// cli runs the program in-process with stdin, and returns what it ended
// with and printed.
func cli(t testing.TB, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelpIsOnStdoutAndExitsZero: every way of asking for help, on every
// command, prints the usage on stdout and nothing on stderr.
func TestHelpIsOnStdoutAndExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"}, {"-help"},
		{"help", "call"}, {"help", "key", "new"}, {"help", "credential", "open"},
		{"key", "help"}, {"key", "--help"}, {"key", "new", "-h"}, {"key", "new", "help"},
		{"credential", "help"}, {"credential", "open", "--help"},
		{"tools", "--help"}, {"tools", "help"}, {"call", "-h"}, {"call", "help"}, {"call", "sensor.calibrate", "--help"},
		{"mcp", "--help"}, {"mcp", "help"},
	} {
		code, stdout, stderr := cli(t, "", args...)
		if code != exitOK || !strings.HasPrefix(stdout, "usage: mesh ") || stderr != "" {
			t.Errorf("mesh %s: expected the usage on stdout and exit 0, got %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	_, stdout, _ := cli(t, "", "call", "--help")
	if !strings.Contains(stdout, "-timeout duration") || !strings.Contains(stdout, "$MESH_CREDENTIAL") {
		t.Errorf("mesh call --help: expected its flags, got %q", stdout)
	}
	_, stdout, _ = cli(t, "", "help")
	for _, c := range []string{"key new", "credential open", "tools", "call", "mcp"} {
		if !strings.Contains(stdout, "mesh "+c+" ") {
			t.Errorf("mesh help: expected %q in the usage, got %q", c, stdout)
		}
	}
}

// TestBadUsageIsOnStderrAndExitsTwo: the usage goes to stderr, nothing to
// stdout.
func TestBadUsageIsOnStderrAndExitsTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: mesh key new"},
		{[]string{"bogus"}, `mesh: unknown command "bogus"`},
		{[]string{"key"}, "mesh key: the verb is new"},
		{[]string{"key", "old"}, "mesh key: the verb is new"},
		{[]string{"credential", "close"}, "mesh credential: the verb is open"},
		{[]string{"key", "new"}, "mesh key new: --out is required"},
		{[]string{"key", "new", "--out"}, "flag needs an argument: -out"},
		{[]string{"key", "new", "--out", "k", "extra"}, `mesh key new: unexpected arguments ["extra"]`},
		{[]string{"credential", "open", "--key", "k"}, "mesh credential open: missing arguments"},
		{[]string{"credential", "open", "sealed.json"}, "mesh credential open: --key is required"},
		{[]string{"tools", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"tools", "extra"}, `mesh tools: unexpected arguments ["extra"]`},
		{[]string{"call"}, "mesh call: missing arguments"},
		{[]string{"call", "a.b", "{}", "more"}, `mesh call: too many arguments: ["more"]`},
		{[]string{"call", "--timeout", "soon", "a.b"}, `invalid value "soon" for flag -timeout`},
		{[]string{"call", "--timeout", "0s", "a.b"}, "mesh call: --timeout 0s: want a positive duration"},
		{[]string{"mcp", "--refresh", "-1s"}, "mesh mcp: --refresh -1s: want 0 (never) or a positive duration"},
	} {
		code, stdout, stderr := cli(t, "", tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("mesh %s: expected exit 2 and %q on stderr, got %d, stdout %q, stderr %q", strings.Join(tc.args, " "), tc.want, code, stdout, stderr)
		}
	}
}

// TestKeyNewWritesAKeyOnceAndPrintsItsPublicHalf: the file is 0600 and
// opens what is sealed to the printed key; a second key new on the same
// file is refused and leaves it as it was.
func TestKeyNewWritesAKeyOnceAndPrintsItsPublicHalf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "person.key")
	code, stdout, stderr := cli(t, "", "key", "new", "--out", path)
	if code != exitOK || !strings.Contains(stderr, "mesh-controller person issue --key") {
		t.Fatalf("key new: %d %q %q", code, stdout, stderr)
	}
	pub, err := seal.ParsePublic(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatalf("expected the public key alone on stdout, got %q: %v", stdout, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("expected the key file 0600, got %v, %v", st.Mode(), err)
	}
	data, _ := os.ReadFile(path)
	k, err := seal.ParseKey(data)
	if err != nil || *k.Public != *pub {
		t.Fatalf("expected the file to hold the printed key's pair: %v", err)
	}
	box, _ := seal.To(pub, []byte("x"))
	if got, err := k.Open(box); err != nil || string(got) != "x" {
		t.Fatalf("expected the key to open what is sealed to it: %v", err)
	}

	code, stdout, stderr = cli(t, "", "key", "new", "--out", path)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "exists: a key is never overwritten") {
		t.Fatalf("key new over a key: expected refused, got %d %q %q", code, stdout, stderr)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, data) {
		t.Fatal("the refused key new changed the file")
	}
}

// sealedFor is what mesh-controller person issue prints for cred, sealed
// to pub.
func sealedFor(t *testing.T, pub *[seal.KeySize]byte, person string, doc []byte) string {
	t.Helper()
	box, err := seal.To(pub, doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(wire.SealedCredential{Person: person, Sealed: box}.Marshal())
}

func newKey(t *testing.T, dir, name string) (string, *[seal.KeySize]byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	code, stdout, stderr := cli(t, "", "key", "new", "--out", path)
	if code != exitOK {
		t.Fatalf("key new: %d %s", code, stderr)
	}
	pub, err := seal.ParsePublic(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// TestCredentialOpenWritesThePersonsCredential: opened with the right
// key, the document is written 0600 (replacing an older one atomically)
// or printed; the wrong key, or something that is not a sealed
// credential, is said so.
func TestCredentialOpenWritesThePersonsCredential(t *testing.T) {
	dir := t.TempDir()
	keyPath, pub := newKey(t, dir, "alice.key")
	otherKey, _ := newKey(t, dir, "other.key")
	cred := wire.Credential{URL: wire.BusURL(wire.PersonUser("alice"), "pw", "nats:4222"), Fingerprint: strings.Repeat("ab", 32), Principal: wire.PrincipalPerson, Name: "alice", Tools: []string{"sensor.calibrate"}}
	doc := cred.Marshal()
	sealedPath := filepath.Join(dir, "alice.sealed.json")
	if err := os.WriteFile(sealedPath, []byte(sealedFor(t, pub, "alice", doc)), 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "alice.json")
	if err := os.WriteFile(out, []byte("an older credential"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "", "credential", "open", "--key", keyPath, "--out", out, sealedPath)
	if code != exitOK || stdout != "" || !strings.Contains(stderr, "wrote person alice's credential to "+out) {
		t.Fatalf("credential open --out: %d %q %q", code, stdout, stderr)
	}
	got, _ := os.ReadFile(out)
	st, _ := os.Stat(out)
	if !bytes.Equal(got, doc) || st.Mode().Perm() != 0o600 {
		t.Fatalf("expected the document written 0600, got %v %q", st.Mode(), got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Fatalf("expected no temporary file left, got %d entries", len(entries))
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, "", "credential", "open", "--key", keyPath, "--out", out, sealedPath); code != exitOK {
		t.Fatalf("credential open again: %d %s", code, stderr)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Fatalf("the same document over a file others could read: expected it 0600, got %v", st.Mode())
	}

	code, stdout, _ = cli(t, sealedFor(t, pub, "alice", doc), "credential", "open", "-", "--key", keyPath)
	if code != exitOK || stdout != string(doc) {
		t.Fatalf("credential open - (stdin, to stdout): expected the document, got %d %q", code, stdout)
	}

	code, stdout, stderr = cli(t, "", "credential", "open", "--key", otherKey, sealedPath)
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "person alice's sealed credential does not open with the key "+otherKey+": it was sealed to another key") {
		t.Fatalf("the wrong key: expected exit 1 saying so, got %d %q %q", code, stdout, stderr)
	}

	bob := cred
	bob.Name, bob.URL = "bob", wire.BusURL(wire.PersonUser("bob"), "pw", "nats:4222")
	code, _, stderr = cli(t, sealedFor(t, pub, "alice", bob.Marshal()), "credential", "open", "--key", keyPath, "-")
	if code != exitFailed || !strings.Contains(stderr, `says it is person alice's, but the document it holds is not (principal "person", name "bob")`) {
		t.Fatalf("someone else's document: expected refused, got %d %q", code, stderr)
	}

	for what, tc := range map[string]struct {
		stdin string
		args  []string
		want  string
	}{
		"not a sealed credential": {"{}", []string{"--key", keyPath, "-"}, "stdin: not a sealed credential: person:"},
		"not a key":               {"", []string{"--key", sealedPath, sealedPath}, sealedPath + ": read sealing key:"},
		"no such sealed file":     {"", []string{"--key", keyPath, filepath.Join(dir, "absent")}, "no such file"},
	} {
		code, stdout, stderr := cli(t, tc.stdin, append([]string{"credential", "open"}, tc.args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: expected exit 2 and %q, got %d %q %q", what, tc.want, code, stdout, stderr)
		}
	}
}

// TestStdoutIsOnlyTheAnswer: nothing but what a command prints reaches
// stdout, even when the bus cannot be reached (the failure is on
// stderr).
func TestStdoutIsOnlyTheAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alice.json")
	cred := wire.Credential{URL: wire.BusURL(wire.PersonUser("alice"), "pw", "127.0.0.1:1"), Fingerprint: strings.Repeat("ab", 32), Principal: wire.PrincipalPerson, Name: "alice"}
	if err := os.WriteFile(path, cred.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"call", "--credential", path, "--timeout", "2s", "sensor.calibrate"}, io.MultiReader(), &out, &errb)
	if code != exitFailed || out.Len() != 0 || !strings.Contains(errb.String(), "mesh call: connect to the bus at 127.0.0.1:1 as person alice:") {
		t.Fatalf("an unreachable bus: expected exit 1, nothing on stdout, got %d %q %q", code, out.String(), errb.String())
	}
	if strings.Contains(errb.String(), "pw") {
		t.Fatalf("the password reached stderr: %q", errb.String())
	}
}
