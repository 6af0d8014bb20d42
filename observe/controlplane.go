package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// ControlStreams are the streams of the control account, the ones no
// reply subject from outside it may write into: every stream wire.Streams
// places there, so a stream added later is held to it too.
var ControlStreams = controlStreams()

func controlStreams() []string {
	var out []string
	for _, s := range wire.Streams {
		if wire.StreamAccount(s) == wire.AccountControl {
			out = append(out, s)
		}
	}
	return out
}

// ControlTargets are the subjects a route aimed at the control plane is
// tried against: node's declaration, its report, every other subject of
// CONTROL, the build queue, and a subject of every subject pattern of
// every stream in the control account (wire.StreamSubjects), each
// wildcard filled in with node, so that a stream added later is aimed at
// without anyone remembering to.
func ControlTargets(node string) []string {
	out := []string{
		wire.NodeDeclare(node), wire.SubjectEnrol, wire.NodeReport(node),
		wire.SubjectPush, wire.SubjectBuilt, wire.SubjectBuildRequest,
	}
	for _, s := range ControlStreams {
		for _, pattern := range wire.StreamSubjects(s) {
			toks := strings.Split(pattern, ".")
			for i, t := range toks {
				switch t {
				case "*":
					toks[i] = node
				case ">":
					toks[i] = node + ".0"
				}
			}
			if subj := strings.Join(toks, "."); !slices.Contains(out, subj) {
				out = append(out, subj)
			}
		}
	}
	return out
}

// Holding is what streams hold: per stream its message count and last
// sequence (what was ever written to it, which a consumer taking messages
// off a work queue does not lower), and per subject its message count and
// last sequence.
type Holding map[string]uint64

// Hold reads what the named streams hold.
func Hold(ctx context.Context, js jetstream.JetStream, streams []string) (Holding, error) {
	out := Holding{}
	for _, name := range streams {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("read stream %s: %w", name, err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			return nil, fmt.Errorf("read stream %s: %w", name, err)
		}
		out[name+" messages"] = info.State.Msgs
		out[name+" last sequence"] = info.State.LastSeq
		for subj, n := range info.State.Subjects {
			out[name+" "+subj+" messages"] = n
			m, err := st.GetLastMsgForSubject(ctx, subj)
			if err != nil {
				return nil, fmt.Errorf("read the last message of %s on %s: %w", name, subj, err)
			}
			out[name+" "+subj+" last sequence"] = m.Sequence
		}
	}
	return out, nil
}

// Changes lists every entry that differs between two holdings, sorted.
func (h Holding) Changes(after Holding) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if after[k] != h[k] {
			out = append(out, fmt.Sprintf("%s: was %d, now %d", k, h[k], after[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := h[k]; !ok {
			out = append(out, fmt.Sprintf("%s: appeared (%d)", k, after[k]))
		}
	}
	return out
}
