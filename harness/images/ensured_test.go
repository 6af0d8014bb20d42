package images

import (
	"context"
	"testing"
)

// TestAnImageEnsuredOnceIsTakenAsItIs: with a run's record, an image the
// run made sure of is not looked at again (no go list, no digest, no
// engine); one it has not is, and a failure records nothing.
func TestAnImageEnsuredOnceIsTakenAsItIs(t *testing.T) {
	var once Ensured
	// No go command and no engine: any look at the checkout or the images fails.
	b := &Builder{Root: t.TempDir(), GoCmd: "/nonexistent/go", Once: &once}
	spec := Probe()
	if _, err := b.Ensure(context.Background(), spec); err == nil {
		t.Fatal("expected the first ensure to look at the checkout, and fail without a go command")
	}
	if once.has(b.Root, b.Ref(spec)) {
		t.Fatal("expected a failed ensure to record nothing")
	}
	once.add(b.Root, b.Ref(spec))
	got, err := b.Ensure(context.Background(), spec)
	if err != nil || got != b.Ref(spec) {
		t.Fatalf("expected the recorded image taken as it is, got %q, %v", got, err)
	}
	if once.has(t.TempDir(), b.Ref(spec)) {
		t.Fatal("expected the record to be per checkout")
	}
	var none *Ensured
	none.add(b.Root, "x")
	if none.has(b.Root, "x") {
		t.Fatal("expected a nil record to record nothing")
	}
}
