package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestParseArtifactChunkIsArtifactChunksInverse(t *testing.T) {
	d := Digest([]byte("an artifact"))
	for _, n := range []int{0, 1, 255} {
		got, gotN, err := ParseArtifactChunk(ArtifactChunk(d, n))
		if err != nil || got != d || gotN != n {
			t.Errorf("chunk %d: expected %s %d, got %s %d %v", n, d, n, got, gotN, err)
		}
	}
	hex := strings.TrimPrefix(d, "sha256:")
	for _, bad := range []string{
		"", "mesh.artifact", "mesh.artifact." + hex, "mesh.artifact." + hex + ".", "mesh.artifact." + hex + ".-1",
		"mesh.artifact." + hex + ".01", "mesh.artifact." + hex + ".256", "mesh.artifact." + hex + ".1.2",
		"mesh.artifact.ABC.0", "mesh.source.modules.fetched", "mesh.artifact." + strings.ToUpper(hex) + ".0",
	} {
		if _, _, err := ParseArtifactChunk(bad); !errors.Is(err, ErrBuild) {
			t.Errorf("%q: expected ErrBuild, got %v", bad, err)
		}
	}
}

func TestArtifactRequestIsReadStrictly(t *testing.T) {
	d := Digest([]byte("an artifact"))
	r, err := ParseArtifactRequest(Marshal(ArtifactRequest{Digest: d, Size: 11}))
	if err != nil || r.Digest != d || r.Size != 11 {
		t.Fatalf("expected the request read back, got %+v %v", r, err)
	}
	for _, bad := range []string{
		`{"digest":"` + d + `","size":0}`,
		`{"digest":"` + d + `","size":67108865}`,
		`{"digest":"sha256:abc","size":1}`,
		`{"digest":"` + d + `","size":1,"node":"node-b"}`,
		`{"digest":"` + d + `","size":1}{}`,
	} {
		if _, err := ParseArtifactRequest([]byte(bad)); !errors.Is(err, ErrBuild) {
			t.Errorf("%s: expected ErrBuild, got %v", bad, err)
		}
	}
}

func TestTheBuildPathsQueuesAreNotControlQueues(t *testing.T) {
	// A control queue is consumed by the CONTROL loop; these are not.
	for _, q := range []string{QueueArtifacts, QueueFetched, SourceFetchQueue("modules"), ArtifactsQueue("node-a")} {
		if _, ok := ControlQueueSubject(q); ok {
			t.Errorf("%s reads as a control queue", q)
		}
	}
	if q, err := ControlQueue(NodeArtifact("node-a")); err != nil || q != "control.node-a.artifact" {
		t.Errorf("expected control.node-a.artifact, got %q %v", q, err)
	}
}
