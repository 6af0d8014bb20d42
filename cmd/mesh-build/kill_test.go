package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/internal/testutil"
	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/build"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestKilledBuilderIsReplaced runs the real programs: the source stand-in
// commits a revision and serves it slowly; builder-a takes the request
// and is killed (SIGKILL) while the repository has not answered; the
// server delivers the request again after the AckWait and builder-b builds
// it; CONTROL holds the outcome once, and once more after the same build
// is asked again; both programs exit 0 on SIGTERM.
func TestKilledBuilderIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and waits out an AckWait")
	}
	bin := t.TempDir()
	meshBuild := goBuild(t, filepath.Join(bin, "mesh-build"), ".")
	source := goBuild(t, filepath.Join(bin, "source"), "../../stand-ins/source")

	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	dir := t.TempDir()
	builderCred := bed.CredentialFile(dir, buildtest.Builder)
	sourceCred := bed.CredentialFile(dir, buildtest.Source)
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	toolchain := buildtest.Toolchain(t, program, "sensor")

	t.Log("phase: commit revision r1 of sensor")
	out, err := exec.CommandContext(ctx, source, "commit", "--credential", sourceCred, "--repo", repo,
		"--module", "sensor", "--revision", "r1", "--content", "sensor at r1").Output()
	if err != nil {
		t.Fatalf("source commit: %v", err)
	}
	var change wire.SourceChange
	if err := json.Unmarshal(out, &change); err != nil || change.Revision != "r1" || change.Repo != buildtest.Repo {
		t.Fatalf("expected the announcement of r1 printed, got %q (%v)", out, err)
	}
	if n, err := buildtest.Count(ctx, js, wire.StreamControl, wire.SourceChanged(buildtest.Repo)); err != nil || n != 1 {
		t.Fatalf("expected CONTROL to hold the announcement, got %d (%v)", n, err)
	}

	t.Log("phase: serve the repository, each answer 3s late")
	src := start(t, source, "serve", "--credential", sourceCred, "--repo", repo, "--delay", "3s")
	probe := bed.Dial(buildtest.Builder)
	buildtest.Eventually(t, 10*time.Second, "the repository answering", func() bool {
		// Nobody there is no responders at once; the delayed answerer
		// makes the probe time out instead.
		_, err := probe.Request(wire.SourceFetch(buildtest.Repo), wire.Marshal(wire.FetchRequest{Module: "sensor", Revision: "r1"}), 200*time.Millisecond)
		return errors.Is(err, nats.ErrTimeout)
	})

	t.Log("phase: ask for the build; builder-a takes it")
	req, err := buildtest.Request(ctx, js, "sensor", "r1")
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, meshBuild, "serve", "--credential", builderCred, "--toolchain", toolchain, "--name", "builder-a")
	buildtest.Eventually(t, 15*time.Second, "the request in builder-a's hands", func() bool {
		info, err := buildtest.BuildsState(ctx, js)
		return err == nil && info.NumAckPending == 1
	})

	t.Log("fault: SIGKILL builder-a mid-build")
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if n, err := buildtest.Outcomes(ctx, js); err != nil || n != 0 {
		t.Fatalf("expected no outcome from the killed builder, got %d (%v)", n, err)
	}
	info, err := buildtest.BuildsState(ctx, js)
	if err != nil || info.NumAckPending != 1 {
		t.Fatalf("expected the request still unacked after the kill, got %+v (%v)", info, err)
	}

	t.Log("phase: builder-b takes the redelivered request")
	b := start(t, meshBuild, "serve", "--credential", builderCred, "--toolchain", toolchain, "--name", "builder-b")
	built := buildtest.WaitOutcome(t, js, buildtest.AckWait+30*time.Second)
	if built.ID != req.ID || built.Outcome != wire.BuildSucceeded || built.Builder != "builder-b" {
		t.Fatalf("expected %s built by builder-b, got %+v", req.ID, built)
	}
	acked := func() {
		t.Helper()
		buildtest.Eventually(t, 20*time.Second, "the request acked", func() bool {
			info, err := buildtest.BuildsState(ctx, js)
			return err == nil && info.NumAckPending == 0 && info.NumPending == 0
		})
	}
	acked()
	if info, err := buildtest.BuildsState(ctx, js); err != nil || info.Delivered.Consumer < 2 || info.Delivered.Stream != 1 {
		t.Fatalf("expected request 1 delivered twice, got %+v (%v)", info, err)
	}
	data, err := artifact.Fetch(ctx, bed.Dial(buildtest.Reader), built.Digest, built.Size)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := build.ReadProvenance(data); err != nil || p.ID() != req.ID || string(p.Content) != "sensor at r1" {
		t.Fatalf("expected the provenance of r1, got %+v (%v)", p, err)
	}
	if n, err := buildtest.Outcomes(ctx, js); err != nil || n != 1 {
		t.Fatalf("expected CONTROL to hold the outcome once, got %d (%v)", n, err)
	}

	t.Log("phase: the same build asked again is recorded once")
	if _, err := buildtest.Request(ctx, js, "sensor", "r1"); err != nil {
		t.Fatal(err)
	}
	buildtest.Eventually(t, 20*time.Second, "the second request delivered", func() bool {
		info, err := buildtest.BuildsState(ctx, js)
		return err == nil && info.Delivered.Stream == 2
	})
	acked()
	if n, err := buildtest.Outcomes(ctx, js); err != nil || n != 1 {
		t.Fatalf("expected the second outcome of the same build to be a duplicate, got %d outcomes (%v)", n, err)
	}
	if again, err := buildtest.LastOutcome(ctx, js); err != nil || again.Digest != built.Digest {
		t.Fatalf("expected the same artifact, got %+v (%v)", again, err)
	}

	t.Log("phase: SIGTERM stops both programs with exit 0")
	for _, p := range []*proc{b, src} {
		p.terminate(t)
	}
}

// goBuild builds the package at pkg (relative to this test's directory)
// into out.
func goBuild(t *testing.T, out, pkg string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// proc is a program the test started.
type proc struct {
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	done   chan struct{}
}

// start runs a program; it is killed when the test ends if it still
// runs, and its stderr shown if the test failed.
func start(t *testing.T, path string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(path, args...), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout = &bytes.Buffer{}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s %v:\n%s", filepath.Base(path), args, p.stderr.String())
		}
	})
	return p
}

// terminate sends SIGTERM and expects exit 0 within 10 s.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("expected %s to stop within 10s of SIGTERM", p.cmd.Path)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("expected %s to exit 0 on SIGTERM, got %d:\n%s", filepath.Base(p.cmd.Path), code, p.stderr.String())
	}
}
