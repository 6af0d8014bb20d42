package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestCutoverRefusesAMeshOnNATSAndBadFlags: the mesh this description
// raises is on NATS since its genesis, so there is nothing to move, and
// the command says so, recording nothing; bad bounds are usage errors.
func TestCutoverRefusesAMeshOnNATSAndBadFlags(t *testing.T) {
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()
	for _, bad := range [][]string{{"--within", "0s"}, {"--wait", "-1s"}, {"--within", "soon"}} {
		args := append([]string{"cutover", "--mesh", meshFile, "--state", state}, bad...)
		if code, _, stderr := cli(t, ctx, args...); code != exitUsage {
			t.Errorf("%v: expected exit %d, got %d:\n%s", bad, exitUsage, code, stderr)
		}
	}
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	code, _, stderr := cli(t, ctx, "cutover", "--mesh", meshFile, "--state", state)
	if code != exitFailed || !strings.Contains(stderr, "the mesh is on nats since its genesis") {
		t.Fatalf("cutover of a mesh on NATS: expected exit 1 saying it is on nats, got %d:\n%s", code, stderr)
	}
	if _, err := store.FileStore(state).Cutover(ctx); err == nil {
		t.Fatal("expected no cutover recorded after a refusal")
	}
}

// TestCutoverJoinsAndFollowsTheOneInProgress: a second cutover joins the
// one recorded, and follows it phase by phase until it ends: done exits
// 0, stopped exits 1 naming why; status shows the record and each node's
// part; --json prints the record.
func TestCutoverJoinsAndFollowsTheOneInProgress(t *testing.T) {
	root := t.TempDir()
	meshFile := writeFile(t, root, "mesh.yaml", strings.Replace(good, "PORT", "4222", 1))
	state := filepath.Join(root, "state")
	ctx := context.Background()
	if code, _, stderr := cli(t, ctx, "genesis", "--mesh", meshFile, "--state", state, "--bcrypt-cost", "4"); code != exitOK {
		t.Fatalf("genesis: exit %d\n%s", code, stderr)
	}
	st := store.FileStore(state)
	begun := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	cut := store.Cutover{Generation: 1, From: wire.BusAMQP, To: wire.BusNATS, Phase: store.CutoverPrepare, PhaseSince: begun.Add(time.Second),
		Begun: begun, Within: time.Minute, Target: store.BusTarget{Addr: "nats:4222"},
		Nodes: map[string]store.CutoverNode{"a": {Prepare: 2, Prepared: begun.Add(2 * time.Second)}, "b": {Prepare: 3}}}
	put := func(c store.Cutover) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutCutover(ctx, c) }); err != nil {
			t.Fatal(err)
		}
	}
	put(cut)
	// A person issued before the switch holds a credential for the broker.
	carol := store.Person{Name: "carol", Tools: []string{"em.t"}, SealingKey: "KEY", Issued: begun}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutPerson(ctx, carol) }); err != nil {
		t.Fatal(err)
	}
	const issueCarolAgain = "  person carol holds a credential for amqp (issued 2026-12-05T09:00:00Z): issue it again: mesh-controller person issue carol --tools em.t --key KEY\n"

	code, stdout, stderr := cli(t, ctx, "cutover", "--mesh", meshFile, "--state", state, "--wait", "0")
	if code != exitOK || !strings.Contains(stdout, "cutover 1 from amqp to nats in progress: joined") || !strings.Contains(stdout, "prepare: every node proves") {
		t.Fatalf("cutover while one is in progress: expected it joined, got %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, ctx, "status", "--state", state)
	for _, want := range []string{
		"cutover 1 from amqp to nats, begun 2026-12-05T09:00:00Z: prepare:",
		"  a: reached nats at 2026-12-05T09:00:02Z\n",
		"  b: asked to prove it reaches nats (revision 3), not heard yet\n",
	} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Fatalf("status: expected %q, got %d:\n%s", want, code, stdout)
		}
	}
	if strings.Contains(stdout, "person carol") {
		t.Fatalf("status before the switch: expected nobody named to issue again, got:\n%s", stdout)
	}

	// The record moves on while the command follows it.
	go func() {
		time.Sleep(2 * followEvery)
		cut.Phase, cut.PhaseSince = store.CutoverSwitch, begun.Add(3*time.Second)
		cut.Nodes["a"] = store.CutoverNode{Prepare: 2, Prepared: begun.Add(2 * time.Second), Switch: 4, Switched: begun.Add(4 * time.Second)}
		cut.Nodes["b"] = store.CutoverNode{Prepare: 3, Prepared: begun.Add(2 * time.Second), Switch: 5}
		cut.Blocked = "not heard on nats 2m0s after the switch (bound 1m0s): b"
		cut.Committed = begun.Add(3500 * time.Millisecond)
		put(cut)
		time.Sleep(2 * followEvery)
		cut.Phase, cut.PhaseSince, cut.Blocked, cut.Ended = store.CutoverDone, begun.Add(5*time.Second), "", begun.Add(5*time.Second)
		put(cut)
	}()
	code, stdout, stderr = cli(t, ctx, "cutover", "--mesh", meshFile, "--state", state, "--wait", "20s")
	for _, want := range []string{"switch: every credential names nats", "waiting: not heard on nats 2m0s after the switch (bound 1m0s): b", "cutover 1 done: the mesh is on nats, nothing of it left on amqp (5s)\n" + issueCarolAgain} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Fatalf("cutover followed to its end: expected exit 0 and %q, got %d:\n%s%s", want, code, stdout, stderr)
		}
	}
	if _, stdout, _ = cli(t, ctx, "status", "--state", state); !strings.Contains(stdout, "  a: reached nats at 2026-12-05T09:00:02Z; on nats since 2026-12-05T09:00:04Z, 500ms after the switch\n") || !strings.Contains(stdout, issueCarolAgain) {
		t.Fatalf("status after the cutover: expected node a's switch and how long after the commit, and carol named to issue again, got:\n%s", stdout)
	}
	var again struct {
		IssueAgain []struct{ Person, Bus, Command string } `json:"issue_again"`
	}
	if _, stdout, _ = cli(t, ctx, "status", "--state", state, "--json"); json.Unmarshal([]byte(stdout), &again) != nil || len(again.IssueAgain) != 1 ||
		again.IssueAgain[0].Person != "carol" || again.IssueAgain[0].Bus != wire.BusAMQP || !strings.HasPrefix(again.IssueAgain[0].Command, "mesh-controller person issue carol ") {
		t.Fatalf("status --json after the cutover: expected carol to issue again, got:\n%s", stdout)
	}

	// Stopped: the next cutover's record, followed, exits 1 naming why.
	stopped := store.Cutover{Generation: 2, From: wire.BusAMQP, To: wire.BusNATS, Phase: store.CutoverPrepare, PhaseSince: begun, Begun: begun, Within: time.Minute,
		Nodes: map[string]store.CutoverNode{"b": {Prepare: 6}}}
	put(stopped)
	go func() {
		time.Sleep(2 * followEvery)
		stopped.Phase, stopped.Stopped, stopped.Ended = store.CutoverStopped, "nodes not heard having reached nats within 1m0s: b", begun.Add(time.Minute)
		put(stopped)
	}()
	code, stdout, stderr = cli(t, ctx, "cutover", "--mesh", meshFile, "--state", state, "--json")
	var got store.Cutover
	if code != exitFailed || json.Unmarshal([]byte(stdout), &got) != nil || got.Phase != store.CutoverStopped || !strings.Contains(stderr, "cutover 2 stopped, the mesh stays on amqp: nodes not heard having reached nats within 1m0s: b") {
		t.Fatalf("cutover stopped: expected exit 1 with the record as JSON and why, got %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, ctx, "status", "--state", state, "--json")
	var withCutover struct {
		Cutover *store.Cutover `json:"cutover"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &withCutover) != nil || withCutover.Cutover == nil || withCutover.Cutover.Generation != 2 {
		t.Fatalf("status --json: expected cutover 2, got %d:\n%s", code, stdout)
	}
}
