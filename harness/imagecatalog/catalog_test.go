package imagecatalog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/conformance"
	"github.com/meshbus/mesh/harness/images"
)

// The catalog holds every image a bed may ask for: warming a machine
// with it leaves no build to a bed's first scenario.
func TestEveryImageIsNamed(t *testing.T) {
	reg, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	names := New(&images.Builder{}, reg, func(string) string { return "" }).Names()
	want := []string{"mesh-rabbitmq", "mesh-postgres", "mesh-netem", images.DriverName("js")}
	for _, s := range images.All() {
		want = append(want, s.Name)
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("expected the catalog to name %s, it names %v", w, names)
		}
	}
	if len(names) != len(want) {
		t.Errorf("expected %d images, the catalog names %d: %v", len(want), len(names), names)
	}
}

// An unknown name is refused before anything is built.
func TestUnknownImageIsRefusedFirst(t *testing.T) {
	reg, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := New(&images.Builder{}, reg, func(string) string { return "" })
	refs, err := c.Ensure(t.Context(), images.NATS().Name, "mesh-nope")
	if !errors.Is(err, ErrUnknown) {
		t.Fatalf("expected ErrUnknown, got %v", err)
	}
	if len(refs) != 0 {
		t.Fatalf("expected nothing built, got %v", refs)
	}
}

// TestTheTwoLanesBuildAtOnce: a Go image and a Debian one are built at
// the same time (each waits here for the other to have started), the
// references come back in the catalog's order whatever finished first,
// a failure does not stop the others, and once the context ends a lane
// starts nothing more.
func TestTheTwoLanesBuildAtOnce(t *testing.T) {
	goStarted, debStarted := make(chan struct{}), make(chan struct{})
	waitFor := func(ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the other lane did not start: the lanes ran one after the other")
		}
	}
	c := &Catalog{b: &images.Builder{}, entries: []entry{
		{"go-a", laneGo, func(context.Context, *images.Builder) (string, error) {
			close(goStarted)
			return "go-a:local", waitFor(debStarted)
		}},
		{"deb-a", laneDebian, func(context.Context, *images.Builder) (string, error) {
			close(debStarted)
			return "deb-a:local", waitFor(goStarted)
		}},
		{"go-b", laneGo, func(context.Context, *images.Builder) (string, error) { return "", errors.New("broken") }},
		{"deb-b", laneDebian, func(context.Context, *images.Builder) (string, error) { return "deb-b:local", nil }},
	}}
	refs, err := c.Ensure(context.Background())
	if strings.Join(refs, ",") != "go-a:local,deb-a:local,deb-b:local" {
		t.Fatalf("expected the ready images in the catalog's order, got %v (%v)", refs, err)
	}
	if err == nil || !strings.Contains(err.Error(), "build go-b: broken") || strings.Contains(err.Error(), "did not start") {
		t.Fatalf("expected go-b's failure alone, got %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	started := 0
	c.entries = []entry{
		{"go-a", laneGo, func(context.Context, *images.Builder) (string, error) { started++; cancel(); return "go-a:local", nil }},
		{"go-b", laneGo, func(context.Context, *images.Builder) (string, error) { started++; return "go-b:local", nil }},
	}
	if _, err := c.Ensure(ctx); !errors.Is(err, context.Canceled) || started != 1 {
		t.Fatalf("expected nothing started after the cancel, and the cancel said; started %d, got %v", started, err)
	}
}
