package natsplane

import (
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// sampleMesh is the beds' sample with a second consumer whose manifest
// consumes overlapping patterns (as package controller's tests use it).
func sampleMesh(t *testing.T) *meshdesc.Mesh {
	t.Helper()
	m, err := meshdesc.Load(filepath.Join("..", "..", "..", "features", "testdata", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m.Modules = append(m.Modules, meshdesc.Module{Name: "watcher", Consumes: []string{"sensor.alarm.raised", "sensor.alarm.>"}})
	m.Nodes[0].Modules = append(m.Nodes[0].Modules, "watcher")
	y, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := meshdesc.Parse(y)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
