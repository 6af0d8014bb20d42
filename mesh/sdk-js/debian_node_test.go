package sdkjs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness"
	"github.com/meshbus/mesh/harness/images"
)

// TestTheUnitSuitesPassOnTheDriverImagesNode runs the unit suites on the
// Node the conformance bed runs the driver on: Debian bookworm's, in the
// driver's image (built from the checkout when missing or stale), so the
// code is known to run there as on this machine's. Where no Docker engine
// answers it is skipped, saying so; CI has one.
func TestTheUnitSuitesPassOnTheDriverImagesNode(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it builds and runs a container")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := harness.DockerAvailable(ctx); err != nil {
		t.Skipf("skipped: no Docker engine answers (%v)", err)
	}
	readFiles(t, "src", "test", "driver")
	reg, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	impl, ok := reg.Implementation("js")
	if !ok {
		t.Fatal("the registry has no implementation js")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b := &images.Builder{Root: root, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	ref, err := b.EnsureDriver(ctx, impl, images.DebianFromEnv(os.Getenv))
	if err != nil {
		t.Fatalf("the driver's image: %v", err)
	}
	sdk, features := filepath.Join(root, "mesh", "sdk-js"), filepath.Join(root, "features")
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network=none",
		"-v", sdk+":/sdk:ro", "-v", features+":/features:ro", "-w", "/sdk",
		"--entrypoint", "/bin/sh", ref, "-c", "node --version && node --test test/*.test.js").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in %s: %v\n%s", ref, err, out)
	}
	version := regexp.MustCompile(`(?m)^v(\d+\.\d+\.\d+)$`).FindSubmatch(out)
	pass := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	fail := regexp.MustCompile(`(?m)^# fail (\d+)$`).FindSubmatch(out)
	if version == nil || pass == nil || fail == nil || string(fail[1]) != "0" {
		t.Fatalf("node --test in %s printed no clean counts:\n%s", ref, out)
	}
	t.Logf("node %s (%s): %s passed", version[1], ref, pass[1])
}
