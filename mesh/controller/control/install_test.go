package control

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/controller/controllertest"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/meshdesc"
	"github.com/meshbus/mesh/mesh/wire"
)

// built stores data in ARTIFACTS as the builder does and records the
// build of module at revision that produced it.
func (l *living) built(t *testing.T, module, revision string, data []byte) string {
	t.Helper()
	ctx := controllertest.Ctx(t)
	nc, err := link.Dial(ctx, l.Credential(wire.BuilderUser))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	digest, chunks, err := artifact.Put(ctx, js, data)
	if err != nil {
		t.Fatalf("store the artifact: %v", err)
	}
	l.recordBuild(t, module, revision, digest, int64(len(data)), chunks)
	return digest
}

func (l *living) recordBuild(t *testing.T, module, revision, digest string, size int64, chunks int) {
	t.Helper()
	ctx := controllertest.Ctx(t)
	if err := l.St.Update(ctx, func(tx store.Tx) error {
		return tx.PutBuild(ctx, store.Build{ID: wire.BuildID("modules", module, revision), Repo: "modules", Module: module, Revision: revision,
			Asked: time.Now(), Outcome: wire.BuildSucceeded, Digest: digest, Size: size, Chunks: chunks, Builder: "test", Built: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
}

// withArtifact is the living mesh with module installing digest.
func (l *living) withArtifact(t *testing.T, module, digest string) *meshdesc.Mesh {
	m := *l.M
	m.Modules = append([]meshdesc.Module(nil), l.M.Modules...)
	for i := range m.Modules {
		if m.Modules[i].Name == module {
			m.Modules[i].Artifact = digest
		}
	}
	return controllertest.Revalidate(t, &m)
}

// TestAnInstallCompletesOverTheBus: the push declares the artifact; the
// host fetches it from ARTIFACTS (its grant names that artifact's chunks
// alone), checks its digest, installs it as the module's program, runs it
// as its own process and reports it installed. An artifact whose bytes
// are not its digest is refused, naming both, and the program installed
// before goes on running.
func TestAnInstallCompletesOverTheBus(t *testing.T) {
	l := newLiving(t)
	program := []byte("#!/bin/sh\n# sensor, built from modules@r2\nexec sleep 600\n" + strings.Repeat("#", 3*wire.ArtifactChunkSize/2) + "\n")
	digest := l.built(t, "sensor", "r2", program)
	l.push(l.withArtifact(t, "sensor", digest))
	state := l.startHost("node-a")
	defer func() {
		if t.Failed() {
			r, _ := l.St.Refusals(controllertest.Ctx(t))
			d, _ := l.St.Declared(controllertest.Ctx(t))
			t.Logf("refusals %+v declared %+v counts %+v", r, d, l.loop.Counts())
		}
	}()
	var r store.Reported
	controllertest.Eventually(t, 20*time.Second, "node-a reports sensor installed and running", func() bool {
		reps, _ := l.St.Reports(controllertest.Ctx(t))
		for _, x := range reps {
			if x.Report.Node == "node-a" && x.Report.Installed["sensor"] == digest {
				_, running := x.Report.Running["sensor"]
				r = x
				return running
			}
		}
		return false
	})
	if r.Report.Refused != "" {
		t.Errorf("node-a refused: %s", r.Report.Refused)
	}
	in, err := state.Installed()
	if err != nil || in["sensor"] != digest {
		t.Fatalf("the host's state says installed %v (%v)", in, err)
	}
	installed := state.ModuleProgram("sensor")
	if got, err := os.ReadFile(installed); err != nil || wire.Digest(got) != digest {
		t.Fatalf("the program installed is not the artifact (%v)", err)
	}
	if info, _ := os.Stat(installed); info.Mode().Perm() != 0o755 {
		t.Errorf("the program installed has mode %v", info.Mode().Perm())
	}

	// A build recorded whose chunks hold other bytes.
	forged := wire.Digest([]byte("what the build said"))
	nc, err := link.Dial(controllertest.Ctx(t), l.Credential(wire.BuilderUser))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(controllertest.Ctx(t), wire.ArtifactChunk(forged, 0), []byte("what ARTIFACTS holds")); err != nil {
		t.Fatal(err)
	}
	l.recordBuild(t, "sensor", "r3", forged, int64(len("what ARTIFACTS holds")), 1)
	l.push(l.withArtifact(t, "sensor", forged))
	refused := l.reported("node-a", 2, "digest")
	for _, says := range []string{"module sensor", forged, wire.Digest([]byte("what ARTIFACTS holds"))} {
		if !strings.Contains(refused.Report.Refused, says) {
			t.Errorf("the refusal does not say %q: %s", says, refused.Report.Refused)
		}
	}
	if got, _ := os.ReadFile(installed); wire.Digest(got) != digest {
		t.Error("the refused artifact replaced the program installed before")
	}
}
