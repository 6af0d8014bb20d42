package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/status"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// hostile is what a host (or a builder, or a publisher refused) may put
// in a field status prints: screen clearing, a window title, the
// clipboard (OSC 52), a C1 CSI, a bidi override, a forged line, bytes
// that are not UTF-8.
const hostile = "ok\x1b[2J\x1b]0;title\x07\x1b]52;c;ZXZpbA==\x1b\\\u009b1m\u202eevil\nforged line\xff"

// TestStatusEscapesWhatOtherPrincipalsWrote: a report's running and
// refused fields, a refusal's key and reason and a build's error reach
// the operator's terminal with nothing a terminal acts on; --json stays
// valid JSON saying the same (issue 18).
func TestStatusEscapesWhatOtherPrincipalsWrote(t *testing.T) {
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	err := store.FileStore(state).Update(ctx, func(tx store.Tx) error {
		if err := tx.PutReport(ctx, store.Reported{Seq: 3, Received: at, Report: wire.Report{
			Node: "a", ID: "r1", At: at, Applied: 1, Running: map[string]string{"em": hostile}, Refused: hostile,
		}}); err != nil {
			return err
		}
		if err := tx.PutRefusals(ctx, store.Refusals{
			Counts: map[string]int{store.RefusedEnrolment: 1},
			Last:   []store.Refusal{{Kind: store.RefusedEnrolment, Key: hostile, At: at, Reason: hostile}},
		}); err != nil {
			return err
		}
		return tx.PutBuild(ctx, store.Build{ID: wire.BuildID("r", "em", "v1"), Repo: "r", Module: "em", Revision: "v1", Asked: at,
			Outcome: wire.BuildFailed, Error: hostile, Builder: hostile, Built: at})
	})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, ctx, "status", "--state", state)
	if code != exitOK {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	// The store keeps JSON, which reads the byte that is not UTF-8 as
	// U+FFFD: readable, and kept.
	const escaped = `ok\x1b[2J\x1b]0;title\x07\x1b]52;c;ZXZpbA==\x1b\\u009b1m\u202eevil\nforged line` + "\uFFFD"
	for _, want := range []string{"running em " + escaped, "refused: " + escaped, "enrolment " + escaped + ": " + escaped, "r/em@v1: failed: " + escaped + " (by " + escaped} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status: expected %q in\n%s", want, stdout)
		}
	}
	for i, c := range []byte(stdout) {
		if c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("status: byte %#x at %d reaches the terminal:\n%q", c, i, stdout)
		}
	}
	if strings.Contains(stdout, "\u202e") || strings.Contains(stdout, "\u009b") || strings.Contains(stdout, "\nforged line") {
		t.Fatalf("status: a bidi override, a C1 control or a forged line reaches the terminal:\n%q", stdout)
	}

	code, stdout, stderr = cli(t, ctx, "status", "--state", state, "--json")
	if code != exitOK || !json.Valid([]byte(stdout)) {
		t.Fatalf("status --json: exit %d, valid JSON %v\n%s%s", code, json.Valid([]byte(stdout)), stdout, stderr)
	}
	if strings.ContainsAny(stdout, "\x1b\u009b\u202e\x7f") {
		t.Fatalf("status --json: what a terminal acts on reaches it:\n%q", stdout)
	}
	var got struct {
		Nodes []status.NodeStatus `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Nodes) != 1 || got.Nodes[0].Refused != strings.ToValidUTF8(hostile, "\uFFFD") {
		t.Fatalf("status --json: expected the refusal as it was said, got %+v, %v", got.Nodes, err)
	}
}
