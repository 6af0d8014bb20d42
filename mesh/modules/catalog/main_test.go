package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbus/mesh/internal/clienttest"
	"github.com/meshbus/mesh/mesh/client"
	"github.com/meshbus/mesh/mesh/wire"
)

// TestAMissingOrInvalidConfigurationStopsIt: without a catalogue to
// answer with, the module does not start, and says what was wrong (main
// exits 1 on it), before it connects to anything.
func TestAMissingOrInvalidConfigurationStopsIt(t *testing.T) {
	dir := t.TempDir()
	notACatalogue := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notACatalogue, []byte(`{"tools":[{"module":"Sensor","tool":"calibrate","args":{"type":"object"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, path, want string }{
		{"no variable", "", "no configuration: $MESH_CONFIG is empty"},
		{"no file", filepath.Join(dir, "absent.json"), "read configuration ($MESH_CONFIG): open " + filepath.Join(dir, "absent.json") + ": no such file"},
		{"not a catalogue", notACatalogue, "configuration " + notACatalogue + " ($MESH_CONFIG): not a catalogue: tools[0] module:"},
	} {
		t.Setenv(wire.EnvConfig, tc.path)
		t.Setenv(wire.EnvCredential, filepath.Join(dir, "no-credential-needed.json"))
		err := run(context.Background(), clienttest.Discard())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: expected an error containing %q, got %v", tc.what, tc.want, err)
		}
	}
}

// TestArgumentsOtherThanNoneAreRefused: the catalogue takes none.
func TestArgumentsOtherThanNoneAreRefused(t *testing.T) {
	for _, ok := range []string{"", " ", "{}", " { } "} {
		if err := checkNoArgs([]byte(ok)); err != nil {
			t.Errorf("%q: expected accepted, got %v", ok, err)
		}
	}
	for args, want := range map[string]string{
		`{"module":"sensor","b":1}`: `catalog_tools takes no arguments; got "b", "module"`,
		`[]`:                        `catalog_tools takes no arguments; want {} or nothing, got []`,
		`null`:                      `want {} or nothing, got null`,
		`{`:                         `want {} or nothing, got {`,
	} {
		if err := checkNoArgs([]byte(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: expected %q, got %v", args, want, err)
		}
	}
}

// TestTheCatalogueServesItsConfiguration runs the module against the real
// server with the composed grants: a person's client lists the tools it
// configured, and arguments are a tool error naming them.
func TestTheCatalogueServesItsConfiguration(t *testing.T) {
	m := clienttest.Start(t)
	cfg := filepath.Join(t.TempDir(), "catalogue.json")
	if err := os.WriteFile(cfg, m.Desc.Catalogue().Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(wire.EnvConfig, cfg)
	t.Setenv(wire.EnvCredential, m.CredFile(t, wire.ModuleUser(clienttest.Node, wire.CatalogSeat)))
	t.Setenv(wire.EnvNode, "")
	t.Setenv(wire.EnvModule, "")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, clienttest.Discard()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("catalog: %v", err)
		}
	}()

	bob, err := client.Open(clienttest.Ctx(t, 10*time.Second), m.PersonFile(t, "bob"), client.WithLogger(clienttest.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	callCtx := clienttest.Ctx(t, 20*time.Second)
	// The module may still be starting: no responders until it serves.
	clienttest.Eventually(t, 15*time.Second, func() error {
		tools, err := bob.Tools(callCtx)
		if err != nil {
			return err
		}
		var got []string
		for _, tl := range tools {
			got = append(got, tl.Name())
		}
		if want := []string{"sensor.calibrate", "sensor.reset"}; !slices.Equal(got, want) {
			return fmt.Errorf("expected %v, got %v", want, got)
		}
		return nil
	})

	_, err = bob.Call(callCtx, wire.CatalogSeat+"."+wire.CatalogTool, []byte(`{"module":"sensor"}`))
	if client.KindOf(err) != client.KindTool || !strings.Contains(err.Error(), `catalog_tools takes no arguments; got "module"`) {
		t.Fatalf("arguments: expected a tool error naming them, got %v", err)
	}
}
