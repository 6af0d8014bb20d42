package natslink

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/link"
)

// serverSaid is how nats.go hands the async error handler a -ERR line.
func serverSaid(text string) error {
	return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, text)
}

func TestViolationsCancelTheWatchedCall(t *testing.T) {
	v := newViolations()
	ctx, release := v.watch(context.Background(), "mesh.mod.catalog.tool.catalog_tools")
	defer release()
	other, releaseOther := v.watch(context.Background(), "mesh.mod.catalog.tool.other")
	defer releaseOther()

	if v.observe(errors.New("nats: slow consumer")) {
		t.Fatal("expected an error that is no violation to be left to the log")
	}
	if !v.observe(serverSaid(`Permissions Violation for Publish to "mesh.mod.catalog.tool.catalog_tools"`)) {
		t.Fatal("expected the violation to be matched to the watched call")
	}
	if err := denied(ctx); !errors.Is(err, link.ErrDenied) {
		t.Fatalf("expected the call cancelled with ErrDenied, got %v", context.Cause(ctx))
	}
	if denied(other) != nil || other.Err() != nil {
		t.Fatal("expected a call on another subject untouched")
	}
	if !v.observe(serverSaid(`Permissions Violation for Subscription to "mesh.mod.catalog.tool.other" using queue "catalog.other"`)) {
		t.Fatal("expected a subscription's violation matched too")
	}
	if denied(other) == nil {
		t.Fatal("expected the subscription's call cancelled")
	}
}

func TestViolationsForgetReleasedCalls(t *testing.T) {
	v := newViolations()
	ctx, release := v.watch(context.Background(), "a.b")
	release()
	if v.observe(serverSaid(`Permissions Violation for Publish to "a.b"`)) {
		t.Fatal("expected a released call not to be matched")
	}
	if denied(ctx) != nil {
		t.Fatal("expected a released call not to be denied")
	}
	if len(v.waiting) != 0 {
		t.Fatalf("expected nothing left waiting, got %v", v.waiting)
	}
}

func TestRefuses(t *testing.T) {
	err := serverSaid(`Permissions Violation for Subscription to "mesh.mod.sensor.tool.x" using queue "sensor.x"`)
	if !refuses(err, "mesh.mod.sensor.tool.x") || refuses(err, "mesh.mod.sensor.tool.y") {
		t.Fatal("expected refuses to match the subject exactly")
	}
	if refuses(errors.New(`Subscription to "mesh.mod.sensor.tool.x"`), "mesh.mod.sensor.tool.x") {
		t.Fatal("expected only a permissions violation to count")
	}
}
