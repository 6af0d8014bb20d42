package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	proto "github.com/meshbus/mesh/conformance/driverproto"
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
	if code != proto.ExitUsage {
		t.Fatalf("expected exit %d, got %d: %s", proto.ExitUsage, code, stderr.String())
	}
}

// TestHelp: asking for help is not bad usage: the usage on stdout, exit 0,
// and no protocol line.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"},
		{"connect", "--help"}, {"emit", "-h"}, {"consume", "--help"}, {"serve", "-h"}, {"call", "--help"}, {"grant", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		if code != proto.ExitRan || !strings.HasPrefix(stdout.String(), "driver COMMAND") || strings.Contains(stdout.String(), `"kind"`) {
			t.Errorf("%q: expected exit 0 with the usage alone on stdout, got %d:\n%s%s", args, code, stdout.String(), stderr.String())
		}
	}
	for _, args := range [][]string{{}, {"emit"}, {"emit", "--bogus"}, {"connect", "extra"}, {"frobnicate"}, {"consume", "--pattern", "a", "--timeout", "1m30s"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != proto.ExitUsage || stdout.Len() != 0 {
			t.Errorf("%q: expected exit 2 and nothing on stdout, got %d: %q", args, code, stdout.String())
		}
	}
}

// A command that ran and failed says so in its one closing line, with a
// class, and exits ExitRan: here the credential is missing.
func TestAFailedCommandClosesWithItsClass(t *testing.T) {
	t.Setenv("MESH_CREDENTIAL", t.TempDir()+"/missing.json")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), proto.Emit{Fixture: "../../../features/fixtures/event.json"}.Argv(), &stdout, &stderr); code != proto.ExitRan {
		t.Fatalf("expected exit 0, got %d: %s", code, stderr.String())
	}
	lines, err := proto.ParseOutput(stdout.String())
	if err != nil {
		t.Fatal(err)
	}
	done, err := proto.Closing(lines)
	if err != nil || done.OK || done.Class == "" || len(lines) != 1 {
		t.Fatalf("expected one failed done line with a class, got %v (%v)", lines, err)
	}
}
