package observe

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/natstest"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

func TestCovers(t *testing.T) {
	cases := []struct {
		grant, pattern string
		want           bool
	}{
		{"a.b", "a.b", true},
		{"a.*", "a.b", true},
		{"a.*", "a.*", true},
		{"a.*", "a.>", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a.>", "a.>", true},
		{"a.b", "a.*", false},
		{">", "x", true},
		{"_INBOX.x.>", "_INBOX.>", false},
	}
	for _, c := range cases {
		if got := covers(c.grant, c.pattern); got != c.want {
			t.Errorf("covers(%q, %q): expected %v, got %v", c.grant, c.pattern, c.want, got)
		}
	}
}

// TestCheckGrantsAgainstTheRealServer runs the bed's grant check against
// the in-process server: the composition and the server agree, and a
// deliberately wrong expectation is caught.
func TestCheckGrantsAgainstTheRealServer(t *testing.T) {
	m, err := meshdesc.Load(filepath.Join("..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t, m)
	pub, sub := Universe(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range compose.Principals(m) {
		c, err := Dial(ctx, s.Creds[p.User], "")
		if err != nil {
			t.Fatal(err)
		}
		mismatches, n, err := CheckGrants(ctx, c, p, pub, sub)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no operation checked")
		}
		for _, mm := range mismatches {
			t.Error(mm)
		}
	}

	// A principal judged against another's grants must disagree somewhere:
	// the check is able to fail.
	ps := compose.Principals(m)
	var sensor, logger compose.Principal
	for _, p := range ps {
		switch p.User {
		case wire.ModuleUser("node-a", "sensor"):
			sensor = p
		case wire.ModuleUser("node-b", "logger"):
			logger = p
		}
	}
	c, err := Dial(ctx, s.Creds[sensor.User], "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mismatches, _, err := CheckGrants(ctx, c, logger, pub, sub)
	if err != nil {
		t.Fatal(err)
	}
	if len(mismatches) == 0 {
		t.Fatal("expected the sensor's connection to disagree with the logger's grants")
	}
}
