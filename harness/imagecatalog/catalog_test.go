package imagecatalog

import (
	"errors"
	"slices"
	"testing"

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
