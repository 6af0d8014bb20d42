package main

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshbus/mesh/mesh/wire"
)

// TestPryFindsWhatIsReadable: where nothing keeps it out (its files
// readable, as they were before modules ran as users of their own), pry
// finds the host's credential and a sibling's, in either layout, and not
// its own: the bed's outside check fails if a host lets it look.
func TestPryFindsWhatIsReadable(t *testing.T) {
	state := t.TempDir()
	cred := func(user, node, module string) []byte {
		return wire.Credential{URL: wire.BusURL(user, "pw", "nats:4222"), Fingerprint: strings.Repeat("ab", 32), Node: node, Module: module}.Marshal()
	}
	files := map[string][]byte{
		"credential.json":                cred("host.node-a", "node-a", ""),
		"modules/sensor/credential.json": cred("mod.node-a.sensor", "node-a", "sensor"),
		"modules/logger.json":            cred("mod.node-a.logger", "node-a", "logger"),
		"modules/pry/credential.json":    cred("mod.node-a.pry", "node-a", "pry"),
	}
	for name, data := range files {
		path := filepath.Join(state, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	found := look(filepath.Join(state, "modules/pry/credential.json"), slog.New(slog.DiscardHandler))
	var users []string
	for _, c := range found {
		users = append(users, c.User())
	}
	slices.Sort(users)
	if want := []string{"host.node-a", "mod.node-a.logger", "mod.node-a.sensor"}; !slices.Equal(users, want) {
		t.Fatalf("pry found %v (%v), want %v", users, slices.Sorted(maps.Keys(found)), want)
	}
}
