package beds

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshbus/mesh/harness/topology"
)

// Bed is one acceptance suite: the features that prove a step of design 25 §10.
type Bed struct {
	// Name is how a person calls the bed: lower case, e.g. "genesis".
	Name string
	// Step is the step of design 25 §9 the bed proves; beds run in step order.
	Step int
	// Aliases are other names Lookup accepts, e.g. "genesis-broker".
	Aliases []string
	// Owner is who answers for the bed when it fails.
	Owner string
	// Summary says in one line what the bed proves.
	Summary string
	// Features are the bed's feature files, relative to the features directory
	// ("1-genesis.feature"), run in this order.
	Features []string
	// Timeout bounds the whole bed, teardown included; the runner cancels the
	// scenarios' context when it passes.
	Timeout time.Duration
	// Topology is what the bed raises: its members, their kinds and
	// networks (harness/topology). Zero is topology.Genesis().
	Topology topology.Topology
	// OnBus are the bed's topologies with the mesh on another bus than
	// Topology's, by bus (topology.BusAMQP): a scenario run "on amqp"
	// raises that one (TopologyOn).
	OnBus map[string]topology.Topology
	// Matrix, when set, tallies the bed's scenarios into a table printed with its summary
	// and written to MatrixFile.
	Matrix *Matrix
}

// ErrBadBed is wrapped by every registration error: a bed that is malformed, or that
// collides with another bed or with a bedrun command.
var ErrBadBed = errors.New("bad bed")

// nameRE is what a bed name or alias may be: it must survive a shell, a file name
// (the report directory has one sub-directory per bed) and a junit suite name.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// reserved reports whether n cannot name a bed because Lookup or bedrun gives it
// another meaning.
func reserved(n string) bool {
	switch n {
	case "all", "list", "help", "images", "report":
		return true
	}
	return false
}

// check reports what is wrong with b on its own; features, when not nil, is the
// directory its feature files must exist in.
func (b Bed) check(features fs.FS) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if b.Step < 1 {
		bad("step %d: must be 1 or more", b.Step)
	}
	for _, n := range append([]string{b.Name}, b.Aliases...) {
		if !nameRE.MatchString(n) {
			bad("name %q: must match %s", n, nameRE)
		}
		if reserved(n) {
			bad("name %q: reserved for bedrun", n)
		}
	}
	if b.Owner == "" {
		bad("no owner")
	}
	if b.Summary == "" {
		bad("no summary")
	}
	if b.Timeout <= 0 {
		bad("timeout %s: must be positive", b.Timeout)
	}
	if len(b.Features) == 0 {
		bad("no features")
	}
	if err := b.TopologyOrDefault().Check(); err != nil {
		bad("topology: %w", err)
	}
	for bus, t := range b.OnBus {
		if err := t.Check(); err != nil {
			bad("topology on %s: %w", bus, err)
		}
		if t.MeshBus() != bus {
			bad("topology on %s: its mesh is on %s", bus, t.MeshBus())
		}
	}
	if b.Matrix != nil {
		for _, problem := range b.Matrix.check() {
			bad("%s", problem)
		}
	}
	seen := map[string]bool{}
	for _, f := range b.Features {
		switch {
		case seen[f]:
			bad("feature %s: listed twice", f)
		case !fs.ValidPath(f) || path.Ext(f) != ".feature":
			bad("feature %q: must be a relative path to a .feature file", f)
		case features != nil:
			if _, err := fs.Stat(features, f); err != nil {
				bad("feature %s: %w", f, err)
			}
		}
		seen[f] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w %s: %w", ErrBadBed, b.label(), errors.Join(errs...))
	}
	return nil
}

// TopologyOrDefault is what the bed raises.
func (b Bed) TopologyOrDefault() topology.Topology {
	if len(b.Topology.Members) == 0 {
		return topology.Genesis()
	}
	return b.Topology
}

// TopologyOn is what the bed raises for a scenario with its mesh on bus:
// TopologyOrDefault when that is on bus, else OnBus's.
func (b Bed) TopologyOn(bus string) (topology.Topology, error) {
	if t := b.TopologyOrDefault(); t.MeshBus() == bus {
		return t, nil
	}
	if t, ok := b.OnBus[bus]; ok {
		return t, nil
	}
	buses := []string{b.TopologyOrDefault().MeshBus()}
	for k := range b.OnBus {
		buses = append(buses, k)
	}
	slices.Sort(buses)
	return topology.Topology{}, fmt.Errorf("bed %s raises no mesh on %s (it raises one on: %s)", b.Name, bus, strings.Join(buses, ", "))
}

// label names b in messages even when its name is the thing that is wrong.
func (b Bed) label() string {
	if b.Name == "" {
		return "step " + strconv.Itoa(b.Step)
	}
	return b.Name
}
