package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/meshbus/mesh/mesh/wire"
)

// loadConfig reads the catalogue at path ($MESH_CONFIG), which must be
// there and be one, and returns it as it goes on the wire. It is read
// once: the host starts the module again when its configuration changes
// (wire.Declaration.Config).
func loadConfig(path string) ([]byte, wire.Catalogue, error) {
	if path == "" {
		return nil, wire.Catalogue{}, fmt.Errorf("no configuration: $%s is empty; the host sets it to the catalogue the controller derived from the description", wire.EnvConfig)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, wire.Catalogue{}, fmt.Errorf("read configuration ($%s): %w", wire.EnvConfig, err)
	}
	cat, err := wire.ParseCatalogue(data)
	if err != nil {
		return nil, wire.Catalogue{}, fmt.Errorf("configuration %s ($%s): %w", path, wire.EnvConfig, err)
	}
	return cat.Marshal(), cat, nil
}

// checkNoArgs refuses arguments other than none or {}: the catalogue
// takes none (its schema says additionalProperties: false), and a caller
// sending some expects something it will not get, such as a filter.
func checkNoArgs(args []byte) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		return fmt.Errorf("%s takes no arguments; want {} or nothing, got %s", wire.CatalogTool, show(trimmed))
	}
	if len(fields) > 0 {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, fmt.Sprintf("%q", k))
		}
		slices.Sort(names)
		return fmt.Errorf("%s takes no arguments; got %s", wire.CatalogTool, strings.Join(names, ", "))
	}
	return nil
}

// show is arguments fit for a message: at most 64 bytes of them.
func show(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
