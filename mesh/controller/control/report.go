package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meshbus/mesh/mesh/controller/rollout"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/wire"
)

func isReport(subject string) bool {
	_, ok := wire.NodeOfReport(subject)
	return ok
}

// later says whether report r, at CONTROL position seq, is later than the
// one kept: by position where both have one (NATS: the stream's order is
// the publish order), else by the host's own time of the report (AMQP
// keeps no positions, and a held report may come again after a newer
// one), a newer position winning over none (a node moved onto a bus
// that keeps them).
func later(r wire.Report, seq uint64, kept store.Reported) bool {
	switch {
	case seq > 0 && kept.Seq > 0:
		return kept.Seq < seq
	case seq > 0:
		return true
	case kept.Seq > 0:
		return false
	}
	return !r.At.Before(kept.Report.At)
}

// TakeReport applies a node's report from CONTROL (stream sequence seq):
// read strictly from its subject (wire.ParseReport), from an enrolled
// node, kept as the node's last unless a later one is kept already
// (later), as heard on bus on, with
// its ledger entry in the same update. A report that does not read, or
// is from a node that is not enrolled, is rollout.ErrBadControl.
func TakeReport(ctx context.Context, st store.Store, key string, seq uint64, subject string, data []byte, on string, o rollout.Options) (taken bool, err error) {
	o = o.WithDefaults()
	r, err := wire.ParseReport(subject, data)
	if err != nil {
		return false, fmt.Errorf("%w: %w", rollout.ErrBadControl, err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Applied(ctx, key); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		nodes, err := tx.Nodes(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(nodes, func(n store.Node) bool { return n.Name == r.Node }) {
			return fmt.Errorf("%w: a report from node %s, which is not enrolled", rollout.ErrBadControl, r.Node)
		}
		reports, err := tx.Reports(ctx)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(reports, func(h store.Reported) bool { return h.Report.Node == r.Node }); i < 0 || later(r, seq, reports[i]) {
			if err := tx.PutReport(ctx, store.Reported{Report: r, Seq: seq, Received: o.Now(), Bus: on}); err != nil {
				return err
			}
			taken = true
		}
		return tx.PutApplied(ctx, store.Applied{Key: key, At: o.Now()})
	})
	return taken, err
}
