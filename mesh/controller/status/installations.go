package status

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// What became of an installation.
const (
	// Installed: the node reported the artifact installed, at the
	// revision declared to it.
	Installed = "installed"
	// InstallRefused: the node refused the declaration, naming the
	// artifact (its bytes were not its digest, ARTIFACTS did not hold it
	// whole).
	InstallRefused = "refused"
	// Installing: declared, not reported either way yet.
	Installing = "installing"
)

// Installation is one module's artifact declared to one node, and what
// the node said of it. The living bed compares the record kept on AMQP,
// the path it replaces, with the one kept on NATS, field by field.
type Installation struct {
	Node     string `json:"node"`
	Module   string `json:"module"`
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	Artifact string `json:"artifact"`
	Outcome  string `json:"outcome"`
	// Reason is why the node refused it.
	Reason string `json:"reason,omitempty"`
	// At is when the node said so (its report's time).
	At time.Time `json:"at,omitzero"`
}

// Installations are the installations declared, by node and module: each
// with the build that made its artifact and what the node's last report
// says of it.
func Installations(ctx context.Context, st store.Reader) ([]Installation, error) {
	declared, err := st.Declared(ctx)
	if err != nil {
		return nil, err
	}
	reports, err := st.Reports(ctx)
	if err != nil {
		return nil, err
	}
	builds, err := st.Builds(ctx)
	if err != nil {
		return nil, err
	}
	var out []Installation
	for _, d := range declared {
		i := slices.IndexFunc(reports, func(r store.Reported) bool { return r.Report.Node == d.Node })
		for _, mod := range slices.Sorted(maps.Keys(d.Artifacts)) {
			a := d.Artifacts[mod]
			b, _ := store.BuiltArtifact(builds, a.Digest)
			in := Installation{Node: d.Node, Module: mod, Repo: b.Repo, Revision: b.Revision, Artifact: a.Digest, Outcome: Installing}
			if i >= 0 {
				r := reports[i].Report
				switch {
				case r.Installed[mod] == a.Digest && r.Applied == d.Revision:
					in.Outcome, in.At = Installed, r.At
				case r.Refused != "" && strings.Contains(r.Refused, a.Digest):
					in.Outcome, in.Reason, in.At = InstallRefused, r.Refused, r.At
				}
			}
			out = append(out, in)
		}
	}
	return out, nil
}
