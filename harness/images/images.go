// Package images builds the project's container images offline, from the
// checkout, and only when they are missing or their inputs changed.
//
// There is no registry here: every image of ours is a few static Go
// binaries in a FROM scratch image. An image's inputs (Go version, go.mod,
// go.sum, the Spec and every source file of our module its binaries are
// built from) are hashed into the label mesh.inputs; an image whose label
// matches is reused as it is, so a bed never pays for a build it does not
// need.
package images

import "errors"

// ErrInfrastructure marks failures of the machine rather than of the
// product: no Docker engine, go list or go build failing, a Docker build
// refused. The runner reports them apart from failed scenarios.
var ErrInfrastructure = errors.New("infrastructure")

// module is our module's path; the specs name our packages under it.
const module = "github.com/meshbus/mesh"

// Binary is one program copied into an image.
type Binary struct {
	// Package is an import path in our module or of a dependency pinned in
	// go.mod (github.com/nats-io/nats-server/v2).
	Package string
	// Name is the file name at the image's root: /<Name>.
	Name string
}

// Spec describes one image.
type Spec struct {
	// Name is the repository name; the image is tagged <Name>:local.
	Name       string
	Binaries   []Binary
	Entrypoint []string
	Cmd        []string
}

// NATS is mesh-nats: our entrypoint supervising nats-server built from the
// module version pinned in go.mod (design 25 §5).
func NATS() Spec {
	return Spec{
		Name: "mesh-nats",
		Binaries: []Binary{
			{Package: module + "/cmd/mesh-nats", Name: "mesh-nats"},
			{Package: "github.com/nats-io/nats-server/v2", Name: "nats-server"},
		},
		Entrypoint: []string{"/mesh-nats"},
		Cmd:        []string{"--config=/etc/nats/nats.conf", "--server=/nats-server", "--poll=1s"},
	}
}

// Controller is mesh-controller. Its default command runs the controller
// on the container layout of the brief (state at /var/lib/mesh, the
// description at /mesh/mesh.yaml); genesis and apply override it.
func Controller() Spec {
	return Spec{
		Name:       "mesh-controller",
		Binaries:   []Binary{{Package: module + "/cmd/mesh-controller", Name: "mesh-controller"}},
		Entrypoint: []string{"/mesh-controller"},
		Cmd:        []string{"run", "--mesh=/mesh/mesh.yaml", "--state=/var/lib/mesh"},
	}
}

// Host is mesh-host: the host a node runs, its state at /var/lib/mesh-host
// and its token at /etc/mesh-host/token.json, and reporting every 2 s, the
// beds' cadence (a deployment's default is host.DefaultReportEvery). Until
// installation over the bus puts each module's program in place, the
// programs the beds' modules run are in the image, by module name: the
// sample modules sensor, mesh-catalog and relay (run as relay and as
// stranger), the cutover bed's traffic (stand-ins/traffic, run as ticker
// and as tally), and for every other module the beds' stand-in (/default:
// stand-ins/module).
func Host() Spec {
	return Spec{
		Name: "mesh-host",
		Binaries: []Binary{
			{Package: module + "/cmd/mesh-host", Name: "mesh-host"},
			{Package: module + "/stand-ins/module", Name: "default"},
			{Package: module + "/stand-ins/pry", Name: "pry"},
			{Package: module + "/mesh/modules/sensor", Name: "sensor"},
			{Package: module + "/mesh/modules/catalog", Name: "mesh-catalog"},
			{Package: module + "/mesh/modules/relay", Name: "relay"},
			{Package: module + "/mesh/modules/relay", Name: "stranger"},
			{Package: module + "/stand-ins/traffic", Name: "ticker"},
			{Package: module + "/stand-ins/traffic", Name: "tally"},
		},
		Entrypoint: []string{"/mesh-host"},
		Cmd:        []string{"run", "--token=/etc/mesh-host/token.json", "--state=/var/lib/mesh-host", "--programs=/", "--report-every=2s"},
	}
}

// BuilderCredential is where the builder's and a source repository's
// images read their credential (the harness puts it there).
const BuilderCredential = "/etc/mesh/credential.json"

// BuildMachine is mesh-builder: the builder (mesh-build serve) with, as its
// toolchain, the programs of the sample modules at /toolchain/<module> —
// the stand-in for a compiler: an artifact is the module's program with
// the revision's provenance after it (mesh/build).
func BuildMachine() Spec {
	bins := []Binary{{Package: module + "/cmd/mesh-build", Name: "mesh-build"}}
	for _, m := range []struct{ pkg, name string }{{"sensor", "sensor"}, {"catalog", "mesh-catalog"}, {"relay", "relay"}, {"relay", "stranger"}} {
		bins = append(bins, Binary{Package: module + "/mesh/modules/" + m.pkg, Name: "toolchain/" + m.name})
	}
	return Spec{
		Name:       "mesh-builder",
		Binaries:   bins,
		Entrypoint: []string{"/mesh-build"},
		Cmd:        []string{"serve", "--credential=" + BuilderCredential, "--toolchain=/toolchain"},
	}
}

// Source is mesh-source, the beds' stand-in for a source repository: its
// revisions under /var/lib/source, each fetch answered after 2 s, so that
// a build is in hand long enough for a bed to kill its builder.
func Source() Spec {
	return Spec{
		Name:       "mesh-source",
		Binaries:   []Binary{{Package: module + "/stand-ins/source", Name: "source"}},
		Entrypoint: []string{"/source"},
		Cmd:        []string{"serve", "--credential=" + BuilderCredential, "--repo=/var/lib/source", "--delay=2s"},
	}
}

// PredecessorURL is where the predecessor's image reads the URL of its
// own user on the broker (the harness puts it there).
const PredecessorURL = "/etc/predecessor/url"

// Predecessor is mesh-predecessor, the beds' stand-in for the
// predecessor's AMQP client (design 25 §5): its counts served on port
// 8080.
func Predecessor() Spec {
	return Spec{
		Name:       "mesh-predecessor",
		Binaries:   []Binary{{Package: module + "/stand-ins/predecessor", Name: "predecessor"}},
		Entrypoint: []string{"/predecessor"},
		Cmd:        []string{"--url-file=" + PredecessorURL, "--listen=:8080"},
	}
}

// Probe is mesh-probe, the one-shot observer run on a chosen network.
func Probe() Spec {
	return Spec{
		Name:       "mesh-probe",
		Binaries:   []Binary{{Package: module + "/stand-ins/probe", Name: "mesh-probe"}},
		Entrypoint: []string{"/mesh-probe"},
	}
}

// Module is the image of a sample module of mesh/modules: the module's
// program as /module.
func Module(name string) Spec {
	return Spec{
		Name:       "mesh-module-" + name,
		Binaries:   []Binary{{Package: module + "/mesh/modules/" + name, Name: "module"}},
		Entrypoint: []string{"/module"},
	}
}

// All is every image of Go binaries the beds use: the cluster's, the
// conformance drivers of conformance/registry.yaml written in Go (a test
// keeps the two in step; the others are made of Debian's packages, by
// EnsureDriver), and the sample modules the beds run.
func All() []Spec {
	return []Spec{NATS(), Controller(), Host(), BuildMachine(), Source(), Predecessor(), Probe(), Driver("go", module+"/conformance/drivers/go"), Module("echo")}
}
