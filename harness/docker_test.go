package harness

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/internal/testutil"
)

// deadPID returns a pid no process has: above any pid_max Linux allows,
// checked with kill(pid, 0).
// leftovers counts the containers and networks labelled mesh.run=run.
func leftovers(t *testing.T, docker *client.Client, run string) (containers, networks int) {
	t.Helper()
	ctx := context.Background()
	filter := make(client.Filters).Add("label", LabelRun+"="+run)
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs.Items), len(ns.Items)
}

func TestReapRemovesDeadRuns(t *testing.T) {
	testutil.DockerClient(t)
	ctx := context.Background()
	docker, err := dockerClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead := owner.Labels("dead" + newRunID())
	dead[LabelPID] = strconv.Itoa(testutil.DeadPID(t))
	alive := owner.Labels("live" + newRunID())
	for _, labels := range []map[string]string{dead, alive} {
		name := "mesh-test-" + labels[LabelRun]
		if _, err := docker.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = owner.Remove(context.Background(), docker, LabelRun+"="+alive[LabelRun])
		_ = owner.Remove(context.Background(), docker, LabelRun+"="+dead[LabelRun])
	})
	// The dead run's own temporary work directory goes with it.
	deadWork, err := os.MkdirTemp("", "mesh-"+dead[LabelRun]+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(deadWork) })

	s, err := NewSession(ctx, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	if _, n := leftovers(t, docker, dead[LabelRun]); n != 0 {
		t.Fatalf("expected the dead run's network removed, got %d left", n)
	}
	if _, n := leftovers(t, docker, alive[LabelRun]); n != 1 {
		t.Fatalf("expected the live run's network kept, got %d", n)
	}
	if _, err := os.Stat(deadWork); !os.IsNotExist(err) {
		t.Fatalf("expected the dead run's work dir %s removed, stat says %v", deadWork, err)
	}
}

func TestReapLeavesAKeptRunAlone(t *testing.T) {
	testutil.DockerClient(t)
	ctx := context.Background()
	docker, err := dockerClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run := "kept" + newRunID()
	labels := owner.Labels(run)
	labels[LabelPID] = strconv.Itoa(testutil.DeadPID(t))
	if _, err := docker.NetworkCreate(ctx, "mesh-test-"+run, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Remove(context.Background(), docker, LabelRun+"="+run) })
	if err := os.WriteFile(keptMarker(run), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(keptMarker(run)) })

	s, err := NewSession(ctx, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, n := leftovers(t, docker, run); n != 1 {
		t.Fatalf("expected the kept run's network left alone, got %d", n)
	}
}

func TestCloseRemovesEverythingOfTheRun(t *testing.T) {
	testutil.DockerClient(t)
	ctx := context.Background()
	s, err := NewSession(ctx, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := s.Labels()
	for _, name := range []string{"mesh-" + s.ID(), "mesh-" + s.ID() + "-outside"} {
		if _, err := s.docker.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	if _, n := leftovers(t, s.docker, s.ID()); n != 2 {
		t.Fatalf("expected 2 networks before Close, got %d", n)
	}
	release := s.CloseOnCancel(ctx)
	defer release()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := leftovers(t, s.docker, s.ID()); c+n != 0 {
		t.Fatalf("expected nothing of run %s after Close, got %d containers and %d networks", s.ID(), c, n)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("expected a second Close to succeed, got %v", err)
	}
	if _, err := s.track(ctx, "late", "0123456789ab", "", 0); err == nil {
		t.Fatal("expected tracking a container after Close to fail")
	}
}

func TestCloseOnCancel(t *testing.T) {
	testutil.DockerClient(t)
	s, err := NewSession(context.Background(), SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.docker.NetworkCreate(context.Background(), "mesh-"+s.ID(), client.NetworkCreateOptions{Driver: "bridge", Labels: s.Labels()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.CloseOnCancel(ctx)
	cancel() // what a SIGINT does to signal.NotifyContext's context

	deadline := time.Now().Add(30 * time.Second)
	for {
		_, n := leftovers(t, s.docker, s.ID())
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected the run's network removed after cancel, still %d", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
