package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
)

// TestUsage: bad input exits 2 naming what is wrong; help exits 0.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, exitUsage, "usage:"},
		{[]string{"help"}, exitOK, "--module-ids"},
		{[]string{"serve"}, exitUsage, `unknown command "serve"`},
		{[]string{"run"}, exitUsage, "--state is required"},
		{[]string{"run", "--state", "x", "--module-ids", "9-8"}, exitUsage, "--module-ids"},
		{[]string{"run", "--state", "x", "--token-refused-for", "0s"}, exitUsage, "--token-refused-for positive"},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errs); code != c.code || !strings.Contains(out.String()+errs.String(), c.says) {
			t.Errorf("%v: exit %d, want %d saying %q; said %s%s", c.args, code, c.code, c.says, out.String(), errs.String())
		}
	}
}

// TestATokenTheBusRefusesExitsThree: a host whose token the bus keeps
// refusing stops with exit status 3 and says a new token is needed.
func TestATokenTheBusRefusesExitsThree(t *testing.T) {
	dir := t.TempDir()
	file := natstest.RefusedTokenFile(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"run", "--token", file, "--state", filepath.Join(dir, "state"), "--token-refused-for", "1s"}, &out, &errs)
	if code != exitToken || !strings.Contains(errs.String(), "issue the node a new token") {
		t.Fatalf("exit %d, want %d saying a new token is needed; said %s", code, exitToken, errs.String())
	}
}
