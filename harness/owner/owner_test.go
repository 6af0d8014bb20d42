package owner

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/internal/testutil"
)

func TestAlive(t *testing.T) {
	me := Labels("abc123")
	if !Alive(me) {
		t.Fatalf("expected this process to be alive by its own labels %v", me)
	}
	dead := Labels("abc123")
	dead[LabelPID] = strconv.Itoa(testutil.DeadPID(t))
	if Alive(dead) {
		t.Fatalf("expected pid %s to be dead", dead[LabelPID])
	}
	if _, ok := processStart(os.Getpid()); ok {
		recycled := Labels("abc123")
		recycled[LabelPIDStart] = "1"
		if Alive(recycled) {
			t.Fatal("expected a pid with another start time to count as dead (recycled)")
		}
	}
	other := Labels("abc123")
	other[LabelPID] = dead[LabelPID]
	other[LabelHost] = "some-other-host"
	if !Alive(other) {
		t.Fatal("expected a run of another host to be left alone")
	}
	if !Alive(map[string]string{LabelHarness: "1"}) {
		t.Fatal("expected something without a pid label to be left alone")
	}
}

// TestClaimReapsTheDeadAndLabelsTheLiving: a network left by a dead
// process goes, one of a live process stays, and the labels handed out
// make what they go on this process's.
func TestClaimReapsTheDeadAndLabelsTheLiving(t *testing.T) {
	docker := testutil.DockerClient(t)
	ctx := t.Context()
	dead := Labels("owner-test-dead")
	dead[LabelPID] = strconv.Itoa(testutil.DeadPID(t))
	alive := Labels("owner-test-alive")
	for _, labels := range []map[string]string{dead, alive} {
		if _, err := docker.NetworkCreate(ctx, "mesh-"+labels[LabelRun], client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Remove(context.Background(), docker.Client, LabelRun+"="+labels[LabelRun]) })
	}
	labels, err := Claim(ctx, docker.Client, "owner-test")
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(labels) || !strings.HasPrefix(labels[LabelRun], "owner-test-") || labels[LabelRun] == "owner-test-" {
		t.Fatalf("claimed labels: %v", labels)
	}
	count := func(run string) int {
		ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", LabelRun+"="+run)})
		if err != nil {
			t.Fatal(err)
		}
		return len(ns.Items)
	}
	if n := count(dead[LabelRun]); n != 0 {
		t.Errorf("the dead process's network: %d left, want 0", n)
	}
	if n := count(alive[LabelRun]); n != 1 {
		t.Errorf("the live process's network: %d, want 1", n)
	}
}
