package status

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// NodeStatus is what the controller knows of one node: what it was told
// to run, what it says it runs, and whether it is heard.
type NodeStatus struct {
	Node     string    `json:"node"`
	Enrolled time.Time `json:"enrolled,omitzero"`
	// Declared is the revision of its newest declaration; Applied the one
	// its last report says it runs, with Running the versions.
	Declared uint64            `json:"declared"`
	Applied  uint64            `json:"applied"`
	Running  map[string]string `json:"running,omitempty"`
	// LastReport is when its last report was made; Refused what that
	// report said it refused, if anything.
	LastReport time.Time `json:"last_report,omitzero"`
	Refused    string    `json:"refused,omitempty"`
	// Bus is the bus its last report came on (wire.BusAMQP, wire.BusNATS):
	// the one it is on, as of LastReport; "" when the report came before
	// the controller recorded buses.
	Bus string `json:"bus,omitempty"`
	// Heard is its last heartbeat; Quiet whether it has gone quiet, or
	// QuietUnknown why that cannot be told.
	Heard        time.Time `json:"heard,omitzero"`
	Quiet        bool      `json:"quiet"`
	QuietUnknown string    `json:"quiet_unknown,omitempty"`
}

// RolledOut says the node runs the revision it was declared.
func (n NodeStatus) RolledOut() bool { return n.Declared != 0 && n.Applied == n.Declared }

// NodesStatus is every declared or enrolled node's status at now, by node.
func NodesStatus(ctx context.Context, st store.Reader, now time.Time) ([]NodeStatus, error) {
	declared, err := st.Declared(ctx)
	if err != nil {
		return nil, err
	}
	enrolled, err := st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	reports, err := st.Reports(ctx)
	if err != nil {
		return nil, err
	}
	live, err := st.Liveness(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*NodeStatus{}
	get := func(node string) *NodeStatus {
		if by[node] == nil {
			by[node] = &NodeStatus{Node: node}
		}
		return by[node]
	}
	for _, d := range declared {
		get(d.Node).Declared = d.Revision
	}
	for _, n := range enrolled {
		get(n.Name).Enrolled = n.Enrolled
	}
	for _, r := range reports {
		s := get(r.Report.Node)
		s.Applied, s.Running, s.LastReport, s.Refused, s.Bus = r.Report.Applied, r.Report.Running, r.Report.At, r.Report.Refused, r.Bus
	}
	out := make([]NodeStatus, 0, len(by))
	for _, s := range by {
		s.Heard = live.Heard[s.Node]
		s.Quiet, s.QuietUnknown = live.Quiet(s.Node, now)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
