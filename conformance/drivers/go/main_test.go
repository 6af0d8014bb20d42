package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// --fail-for fails each event for its duration after the event was first
// received, and no longer; each event has its own clock.
func TestFailingFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := failingFor(false, 2*time.Second)
		if !failing("a") {
			t.Fatal("expected the first delivery to fail")
		}
		time.Sleep(time.Second)
		if !failing("a") || !failing("b") {
			t.Fatal("expected a delivery within the duration to fail, and another event's first too")
		}
		time.Sleep(time.Second)
		if failing("a") {
			t.Fatal("expected a delivery once the duration passed to succeed")
		}
		if !failing("b") {
			t.Fatal("expected the later event to fail for its own duration")
		}
	})
	if !failingFor(true, 0)("a") || failingFor(false, 0)("a") {
		t.Fatal("expected --fail always to fail and no flag never to")
	}
}

func TestFailAndFailForExcludeEachOther(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"consume", "--pattern", "emitter.reading", "--fail", "--fail-for", "2s"}, &stdout, &stderr)
	if code != exitUsage {
		t.Fatalf("expected exit %d, got %d: %s", exitUsage, code, stderr.String())
	}
}
