package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: asking for help is not bad usage: the usage on stdout, exit 0,
// and no protocol line.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"},
		{"connect", "--help"}, {"emit", "-h"}, {"consume", "--help"}, {"serve", "-h"}, {"call", "--help"}, {"grant", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		if code != exitRan || !strings.HasPrefix(stdout.String(), "driver COMMAND") || strings.Contains(stdout.String(), `"kind"`) {
			t.Errorf("%q: expected exit 0 with the usage alone on stdout, got %d:\n%s%s", args, code, stdout.String(), stderr.String())
		}
	}
	for _, args := range [][]string{{"emit"}, {"emit", "--bogus"}, {"connect", "extra"}, {"frobnicate"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != exitUsage || stdout.Len() != 0 {
			t.Errorf("%q: expected exit 2 and nothing on stdout, got %d: %q", args, code, stdout.String())
		}
	}
}
