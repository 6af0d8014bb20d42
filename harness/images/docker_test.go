package images

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/meshbus/mesh/internal/testutil"
)

func TestDockerfile(t *testing.T) {
	df, err := dockerfile(NATS())
	if err != nil {
		t.Fatal(err)
	}
	want := `FROM scratch
COPY mesh-nats /mesh-nats
COPY nats-server /nats-server
ENTRYPOINT ["/mesh-nats"]
CMD ["--config=/etc/nats/nats.conf","--server=/nats-server","--poll=1s"]
`
	if string(df) != want {
		t.Fatalf("expected\n%s\ngot\n%s", want, df)
	}
	df, err = dockerfile(Probe())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(df), "CMD") {
		t.Fatalf("expected no CMD for a spec without one, got\n%s", df)
	}
}

func TestReadBuildStream(t *testing.T) {
	ok := `{"stream":"Step 1/3 : FROM scratch\n"}
{"stream":" ---\u003e \n"}
{"aux":{"ID":"sha256:abc"}}
{"stream":"Successfully built abc\n"}
`
	id, err := readBuildStream(strings.NewReader(ok))
	if err != nil || id != "sha256:abc" {
		t.Fatalf("expected sha256:abc, got %q, %v", id, err)
	}
	bad := `{"stream":"Step 2/3 : COPY x /x\n"}
{"errorDetail":{"message":"COPY failed: file not found"},"error":"COPY failed: file not found"}
`
	_, err = readBuildStream(strings.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "COPY failed") || !strings.Contains(err.Error(), "Step 2/3") {
		t.Fatalf("expected the engine's error with the failing step, got %v", err)
	}
	if _, err := readBuildStream(strings.NewReader(`{"stream":`)); err == nil {
		t.Fatal("expected an error for a cut stream")
	}
}

// TestEnsureBuildsOnceAndRebuildsOnChange builds a test-named copy of the
// probe image: the first Ensure builds it, the second leaves the very same
// image, and a changed spec builds a new one and removes the old, now
// dangling, image.
func TestEnsureBuildsOnceAndRebuildsOnChange(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	spec := Probe()
	spec.Name = "mesh-probe-test-" + hex.EncodeToString(suffix)
	var out bytes.Buffer
	b := &Builder{Root: root, Out: &out}
	defer b.Close()
	ref := b.Ref(spec)
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		_ = os.Remove(filepath.Join(os.TempDir(), "mesh-image-"+sanitize(ref)+".lock"))
		t.Logf("builder output:\n%s", out.String())
	})

	inspect := func() client.ImageInspectResult {
		t.Helper()
		img, err := cli.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatalf("inspect %s: %v", ref, err)
		}
		return img
	}

	got, err := b.Ensure(ctx, spec)
	if err != nil {
		t.Fatalf("first ensure: %v", err)
	}
	if got != ref {
		t.Fatalf("expected ref %s, got %s", ref, got)
	}
	first := inspect()
	wantDigest := mustDigest(t, b, root, spec)
	if first.Config == nil || first.Config.Labels[LabelInputs] != wantDigest {
		t.Fatalf("expected label %s=%s on the built image", LabelInputs, wantDigest)
	}
	if ep := first.Config.Entrypoint; len(ep) != 1 || ep[0] != "/mesh-probe" {
		t.Fatalf("expected entrypoint /mesh-probe, got %q", ep)
	}

	if _, err := b.Ensure(ctx, spec); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	second := inspect()
	if second.ID != first.ID || second.Created != first.Created {
		t.Fatalf("expected the second ensure to keep image %s (created %s), got %s (created %s)",
			first.ID, first.Created, second.ID, second.Created)
	}

	spec.Cmd = []string{"tcp", "127.0.0.1:1"}
	if _, err := b.Ensure(ctx, spec); err != nil {
		t.Fatalf("ensure after a change: %v", err)
	}
	third := inspect()
	if third.ID == first.ID {
		t.Fatalf("expected a new image after the spec changed, still %s", first.ID)
	}
	if c := third.Config.Cmd; len(c) != 2 || c[0] != "tcp" {
		t.Fatalf("expected the new command in the image, got %q", c)
	}
	if _, err := cli.ImageInspect(ctx, first.ID); !cerrdefs.IsNotFound(err) {
		t.Fatalf("expected the replaced image %s to be removed, inspect says %v", first.ID, err)
	}
}
