package images

import (
	"slices"
	"testing"

	"github.com/meshbus/mesh/conformance"
)

// TestEveryRegisteredDriverHasAnImage keeps All in step with the
// conformance registry, so that `make images` (and CI) builds every
// driver a bed will run.
func TestEveryRegisteredDriverHasAnImage(t *testing.T) {
	reg, err := conformance.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range reg.Implementations {
		want := Driver(impl.Name, impl.Driver)
		if !slices.ContainsFunc(All(), func(s Spec) bool {
			return s.Name == want.Name && slices.Equal(s.Binaries, want.Binaries)
		}) {
			t.Errorf("implementation %s: its driver image %s (%s) is not in All()", impl.Name, want.Name, impl.Driver)
		}
	}
}
